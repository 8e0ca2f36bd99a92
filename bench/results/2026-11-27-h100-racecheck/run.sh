set -u
# racecheck (and memcheck) at the session's final code on an H100: the one-token layer's tests
# (the kernel the rejected split barriers changed) and the routing plan's (this session's kept
# change). `bash bench/results/2026-11-27-h100-racecheck/run.sh` from the repository root.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/race; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
GTEST_FILTER='Shapes/DecodeLayerGpu.*:Shapes/DecodeLayerDynamicGpu.*:DecodeLayerGpuEdge.*:PlanGpu.*:PlanGather*' TOOLS="racecheck memcheck" \
  timeout 400 bash scripts/gpu_sanitize.sh $B/fusedmoe_gpu_tests > $R/sanitize.log 2>&1; echo "sanitize rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|== compute|tests from.*ran|PASSED|FAILED  \]" $R/sanitize.log | tail -10
gzip -9 $R/sanitize.log
