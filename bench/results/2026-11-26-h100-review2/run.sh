set -u
# Second review of the b64063c..HEAD change: one workspace-carve helper for the four CUTLASS
# wrappers, fused GEMM1 launch counts asserted in every fused-path test. Whole GPU suite, the
# and the memcheck default subset.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
t0=$(date +%s)
timeout 220 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
timeout 150 bash scripts/gpu_sanitize.sh $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[==========\].*ran|ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -4 | tee $R/memcheck_summary.txt
gzip -9 $R/gpu_tests.log $R/memcheck.log
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
