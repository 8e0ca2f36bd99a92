set -u
# The cooperative GEMMs' tail skip (sm90_tail_skip_mainloop.cuh) on an H100: its tests, then the GPU suite.
# `bash bench/results/2026-11-27-h100-tail-skip/tests.sh` from the repository root on the device (tests binary).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/tests; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 100 $B/fusedmoe_gpu_tests --gtest_filter='*TailSkipGpu.*:*Gemm1ActGpu.*:Gemm1ActPathsGpu.*' > $R/new_tests.log 2>&1; echo "new tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|PASSED|FAILED  \]|SKIPPED \]" $R/new_tests.log | tail -8; grep -E "TailSkip" $R/new_tests.log | grep -E "OK \]|FAILED|rel-err" | head -12
timeout 220 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt; gzip -9 $R/gpu_tests.log
