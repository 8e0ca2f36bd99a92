set -u
# v12: GEMM2's operand loaded a step (2 k-blocks) ahead in registers: decode-layer tests, A/B v11 (481b1fc) vs v12 at M = 1.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/r13; mkdir -p $R; t0=$(date +%s); B=$PWD/.devcarry/bin; B11=$PWD/.devcarry/bin_v11
timeout 100 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4
timeout 300 python3 bench/ab.py run --out $R/ab --variant v11: --variant-bench v11=$B11/fusedmoe-bench --variant v12: --variant-bench v12=$B/fusedmoe-bench \
  --order v11,v12,v11,v12,v11,v12 --base v11 -- --preset qwen3-30b-a3b-tp1,gpt-oss-120b --m 1 --formats mxfp4,nvfp4,mxfp4-fp8,w4a8-int4,nvfp4-w4a4 \
  --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.log 2>&1; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
grep "^|" $R/ab.log | tail -11; tail -3 $R/ab.log
gzip -9 $R/tests.log
