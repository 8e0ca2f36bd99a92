set -u
# v5 (each warp kU contiguous k-blocks per row instead of interleaved): decode-layer tests, A/B chain (old) vs v3 vs v5 at M=1.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/r5; mkdir -p $R; t0=$(date +%s); B=$PWD/.devcarry/bin; BO=$PWD/.devcarry/bin_old; B1=$PWD/.devcarry/bin_v3
timeout 100 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4
timeout 240 python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$BO/fusedmoe-bench --variant v3: --variant-bench v3=$B1/fusedmoe-bench --variant v5: --variant-bench v5=$B/fusedmoe-bench \
  --order old,v3,v5,old,v3,v5,old,v3,v5 --base old -- --preset qwen3-30b-a3b-tp1,gpt-oss-120b,gpt-oss-120b-interleaved --m 1 --formats mxfp4,nvfp4 \
  --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.log 2>&1; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
tail -12 $R/ab.log
gzip -9 $R/tests.log
