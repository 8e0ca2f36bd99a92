set -u
# The plan's shared-memory fix (place_warps' static reserve) on an H100: PlanGpu with the new test
# cases on the fixed build and on the same sources with the reserve set to 0 (bin_old: the old
# sizing, expected to fail at the expert counts that filled 48 KB), then the GPU suite (fixed).
# `bash bench/results/2026-11-27-h100-plan-smem/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/plan_smem; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 60 $B/fusedmoe_gpu_tests --gtest_filter='PlanGpu.*' > $R/plan_tests.log 2>&1; echo "plan tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|PASSED|FAILED  \]|Failure" $R/plan_tests.log | tail -5
timeout 60 $PWD/.devcarry/bin_old/fusedmoe_gpu_tests --gtest_filter='PlanGpu.*' > $R/plan_tests_old_sizing.log 2>&1; echo "old-sizing plan tests rc=$?"
grep -E "^\[  FAILED|PASSED|FAILED  \]|E=[0-9]+ slots|cuda|error" $R/plan_tests_old_sizing.log | head -12
timeout 220 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
gzip -9 $R/gpu_tests.log
