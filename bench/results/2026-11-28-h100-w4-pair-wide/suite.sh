set -u
# The whole GPU suite and a memcheck of the wgmma tests at the session's last kernel commit (binaries of .devcarry/sha8).
# r3: `bash bench/results/2026-11-28-h100-w4-pair-wide/suite.sh`
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; O=$OUT/r3; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
timeout 300 $B/tests > $O/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 $B/tests --gtest_filter='*W4Wgmma*' > $O/mc.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
{ grep -E "^\[  FAILED|PASSED  \]|FAILED  \]|SKIPPED \]" $O/gpu_tests.log | tail -6; grep -E "PASSED|FAILED|ERROR SUMMARY" $O/mc.log | tail -3; } | tee $O/summary.txt
gzip -9 $O/gpu_tests.log $O/mc.log
