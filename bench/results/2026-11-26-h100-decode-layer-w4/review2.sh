set -u
# Review mends (sum_task_parts shared by both one-token kernels, generic_factor_with_row, one MMA loop for int4 and
# e2m1, permute_b in the mma kernel): the decode-layer, W4, e2m1 and 4-bit layer tests, memcheck of the one-token
# tests, A/B against f576198 at 1 token (second version: GEMM1's factor with the compile-time a_expert test again).
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/review2; mkdir -p $R; t0=$(date +%s); B=$PWD/.devcarry/bin; BO=$PWD/.devcarry/bin_old
timeout 200 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*:*W4*:*E2m1*:*Int4*:AllFormatsActivations/LayerGpu.*:EdgeGpu.*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4
timeout 300 python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$BO/fusedmoe-bench --variant new: --variant-bench new=$B/fusedmoe-bench \
  --order old,new,old,new,old,new --base old -- --preset qwen3-30b-a3b-tp1,gpt-oss-120b --m 1 --formats mxfp4,nvfp4,mxfp4-fp8,w4a8-int4,nvfp4-w4a4,fp8-tensor \
  --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.log 2>&1; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
grep "^|" $R/ab.log | tail -30; tail -3 $R/ab.log
gzip -9 $R/tests.log
