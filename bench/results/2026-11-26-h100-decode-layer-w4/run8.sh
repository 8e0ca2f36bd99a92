set -u
# v7: GEMM2's operand rows copied into shared memory after the grid barrier (one L2 round trip) instead of read at
# L2 per k-step: decode-layer tests, A/B v6 (17d0ded) vs v7 at M = 1.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/r8; mkdir -p $R; t0=$(date +%s); B=$PWD/.devcarry/bin; B6=$PWD/.devcarry/bin_v6
timeout 100 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4
timeout 300 python3 bench/ab.py run --out $R/ab --variant v6: --variant-bench v6=$B6/fusedmoe-bench --variant v7: --variant-bench v7=$B/fusedmoe-bench \
  --order v6,v7,v6,v7,v6,v7 --base v6 -- --preset qwen3-30b-a3b-tp1,gpt-oss-120b,gpt-oss-120b-interleaved --m 1 --formats mxfp4,nvfp4 \
  --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.log 2>&1; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
tail -10 $R/ab.log
gzip -9 $R/tests.log
