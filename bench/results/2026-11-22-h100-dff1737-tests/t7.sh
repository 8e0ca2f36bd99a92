set -u
R=$OUT/t7; mkdir -p $R; t0=$(date +%s)
B=.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; echo "commit $(cat .devcarry/sha5) (binaries built from it, unmodified)" >> $R/device.txt; date -u >> $R/device.txt
timeout 200 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
F="*LayerGpu*:*Fp8Block*:*FinalizePaths*:*LongNGpu*:*LargeGpu*:*LongKGpu*:*CrossDtype*:*W4*"
GTEST_FILTER="$F" timeout 300 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
echo "filter $F" > $R/memcheck_summary.txt
grep -E "ERROR SUMMARY|PASSED|FAILED  \] [0-9]" $R/memcheck.log | tail -3 | tee -a $R/memcheck_summary.txt
cd $R && tar czf logs.tgz gpu_tests.log memcheck.log && rm gpu_tests.log memcheck.log
