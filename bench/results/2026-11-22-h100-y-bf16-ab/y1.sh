set -u
R=$OUT/y1; mkdir -p $R; t0=$(date +%s)
B=.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt
GTEST_FILTER="*LongNGpu*:*LargeGpu*:*LongKGpu*:*FinalizePaths*" timeout 150 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/san.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED" $R/san.log | tail -3 | tee $R/memcheck_summary.txt
timeout 300 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
grep -E "rel-err" $R/gpu_tests.log | grep -E "bf16|fp8" | sort -t' ' -k4 -g | tail -5
FMOE_AB_Y32=1 GTEST_FILTER="*LayerGpu*:*LongNGpu*:*LargeGpu*:*LongKGpu*" timeout 100 $B/fusedmoe_gpu_tests > $R/gpu_tests_y32.log 2>&1; echo "y32 rc=$? $(( $(date +%s)-t0 ))s"
