set -u
# cd25584: GPU suite, memcheck on the fused GEMM1 + activation tests
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/tests; mkdir -p $R; t0=$(date +%s)
B=$PWD/.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; echo "commit $(cat .devcarry/sha8) (binaries built from it, unmodified)" >> $R/device.txt; date -u >> $R/device.txt
timeout 300 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
GTEST_FILTER="*Gemm1Act*:Formats/LongKGpu.*" timeout 200 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3 | tee $R/memcheck_summary.txt
gzip -9 $R/gpu_tests.log $R/memcheck.log
cd $OUT && tar czf tests.tgz tests && rm -rf tests
