set -u
# GPU suite and memcheck default subset at c11c841 (binaries of .devcarry/sha8).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/t; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; echo "commit $(cat .devcarry/sha8)" >> $R/device.txt; date -u >> $R/device.txt
timeout 170 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
timeout 100 bash scripts/gpu_sanitize.sh $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[==========\].*ran|ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -4 | tee $R/memcheck_summary.txt
gzip -9 $R/gpu_tests.log $R/memcheck.log
cd $OUT && tar czf t.tgz t && rm -rf t
