set -u
# v3 (GEMM1 software-pipelined over tasks, operands in mma order): decode-layer tests, A/B chain (old) vs v1 vs v3 at M=1.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/r3; mkdir -p $R; t0=$(date +%s); B=$PWD/.devcarry/bin; BO=$PWD/.devcarry/bin_old; B1=$PWD/.devcarry/bin_v1
timeout 100 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4
timeout 240 python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$BO/fusedmoe-bench --variant v1: --variant-bench v1=$B1/fusedmoe-bench --variant v3: --variant-bench v3=$B/fusedmoe-bench \
  --order old,v1,v3,old,v1,v3,old,v1,v3 --base old -- --preset qwen3-30b-a3b-tp1,gpt-oss-120b,gpt-oss-120b-interleaved --m 1 --formats mxfp4,nvfp4 \
  --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.log 2>&1; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
tail -12 $R/ab.log
gzip -9 $R/tests.log
