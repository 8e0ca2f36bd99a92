set -u
# GEMM1 with its A rows gathered by token through cp.async (sm90_gather_a_mainloop.cuh) on an H100: its GPU tests,
# the GPU suite (SUITE=0 skips it), then a same-binary A/B against the permuted operand
# (FUSEDMOE_GEMM1_GATHER=0); the gathered side is =1 (forced) unless GATHER_ENV= (empty: AUTO);
# TP1=1 adds DeepSeek-V3 TP1 at 4096 tokens.
# `bash bench/results/2026-11-27-h100-gemm1-cpasync/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/gather; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 60 $B/fusedmoe_gpu_tests --gtest_filter='Gemm1GatherGpu.*' > $R/gather_tests.log 2>&1; echo "gather tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|PASSED|rel-err" $R/gather_tests.log | tail -30
if [ "${SUITE:-1}" = 1 ]; then timeout 220 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"; fi
[ -f $R/gpu_tests.log ] && grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
[ -f $R/gpu_tests.log ] && gzip -9 $R/gpu_tests.log
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
timeout 300 $AB --out $R/ab --variant permuted:FUSEDMOE_GEMM1_GATHER=0 --variant gathered:${GATHER_ENV-FUSEDMOE_GEMM1_GATHER=1} --order permuted,gathered,permuted,gathered --base permuted -- \
  --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1024,2048,4096 --formats bf16,fp8-tensor --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 1.0 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
if [ -n "${TP1:-}" ]; then timeout 200 $AB --out $R/ab_tp1 --variant permuted:FUSEDMOE_GEMM1_GATHER=0 --variant gathered:${GATHER_ENV-FUSEDMOE_GEMM1_GATHER=1} --order permuted,gathered,permuted,gathered --base permuted -- \
  --preset deepseek-v3-tp1 --m 4096 --formats bf16,fp8-tensor --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.5 > $R/ab_tp1.log 2>&1
echo "ab tp1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_tp1.log; fi
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
