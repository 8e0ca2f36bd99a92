set -u
# The whole GPU test suite with the binaries of 41d80d2 (kernels unchanged since 1bd208a; the session ended with its experiments reverted), and its output.
# `bash bench/results/2026-11-28-h100-final-suite/suite.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; O=$OUT/suite; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
t0=$(date +%s)
timeout 420 $B/fusedmoe_gpu_tests > $O/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|PASSED  \]|FAILED  \]|SKIPPED \]" $O/gpu_tests.log | tail -6 | tee $O/summary.txt
gzip -9 $O/gpu_tests.log
