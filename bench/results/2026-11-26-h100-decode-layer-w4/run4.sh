set -u
# v4 (W2 copies issued by the lanes of warp 0, one slot each): decode-layer tests, A/B chain (old) vs v3 vs v4 at M=1.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/r4; mkdir -p $R; t0=$(date +%s); B=$PWD/.devcarry/bin; BO=$PWD/.devcarry/bin_old; B1=$PWD/.devcarry/bin_v3
timeout 100 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4
timeout 240 python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$BO/fusedmoe-bench --variant v3: --variant-bench v3=$B1/fusedmoe-bench --variant v4: --variant-bench v4=$B/fusedmoe-bench \
  --order old,v3,v4,old,v3,v4,old,v3,v4 --base old -- --preset qwen3-30b-a3b-tp1,gpt-oss-120b,gpt-oss-120b-interleaved --m 1 --formats mxfp4,nvfp4 \
  --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.log 2>&1; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
tail -12 $R/ab.log
gzip -9 $R/tests.log
