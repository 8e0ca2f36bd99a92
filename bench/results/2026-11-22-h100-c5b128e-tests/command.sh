set -u
K=$(cd .devcarry/kit && pwd); S=$(cat .devcarry/sha); t0=$(date +%s)
R=$OUT/call6; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; echo "sha $S (unmodified)" >> $R/device.txt; date -u >> $R/device.txt
cd .devcarry/snap
FUSEDMOE_KIT=$K OUT=$R/check bash scripts/gpu_check.sh build tests > $R/check_out.txt 2>&1; echo "build+tests rc=$? $(( $(date +%s)-t0 ))s"
rm -f $R/check/build.log $R/check_out.txt
grep -E "FAILED|Failure" $R/check/gpu_tests.log | head
grep -E "PASSED|FAILED|SKIPPED \]" $R/check/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
GTEST_FILTER="Formats/W4Gpu.*/w4a8*:W4GpuEdge.*" timeout 150 bash scripts/gpu_sanitize.sh build-gpu/tests/fusedmoe_gpu_tests > $R/san.log 2>&1; echo "memcheck rc=$?"
grep -E "ERROR SUMMARY|LEAK SUMMARY|PASSED|FAILED" $R/san.log | tee $R/sanitize_summary.txt; rm -f $R/san.log
cd $OUT && tar czf call6.tgz call6 && rm -rf call6
