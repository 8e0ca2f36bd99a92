set -u
# Review mends of the 4-bit tests (launch count of the fused kernel, shared/distinct nvfp4 scales
# that both occur): the affected suites and memcheck, then the whole 4-bit subset.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
timeout 200 $B/fusedmoe_gpu_tests --gtest_filter='*W4*:*w4*:*Mxfp4*:*Nvfp4*:*mxfp4*:*nvfp4*:*GatherTokenPaths*:*ActivationRow*' > $R/tests.log 2>&1; echo "tests rc=$?"; grep -E "^\[  FAILED" $R/tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -3
timeout 120 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='W4WgmmaActGpu.LayerRunsFusedPath:*GatherTokenPaths*nvfp4*' > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -2
gzip -9 $R/tests.log $R/memcheck.log
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
