set -u
# v8: GEMM2's sums in a 4 KB static array (was 16 KB): gpt-oss-120b mxfp4 in the 164 KB shared-memory configuration (L1 92 KB, was 60):
# decode-layer tests, A/B v6 (17d0ded) vs v8 at M = 1.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/r9; mkdir -p $R; t0=$(date +%s); B=$PWD/.devcarry/bin; B6=$PWD/.devcarry/bin_v6
timeout 100 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4
timeout 300 python3 bench/ab.py run --out $R/ab --variant v6: --variant-bench v6=$B6/fusedmoe-bench --variant v8: --variant-bench v8=$B/fusedmoe-bench \
  --order v6,v8,v6,v8,v6,v8 --base v6 -- --preset qwen3-30b-a3b-tp1,gpt-oss-120b,gpt-oss-120b-interleaved --m 1 --formats mxfp4,nvfp4 \
  --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.log 2>&1; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
tail -10 $R/ab.log
gzip -9 $R/tests.log
