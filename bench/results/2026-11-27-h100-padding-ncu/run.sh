set -u
# Where the experts' extra, nearly empty 128-row tiles spend their time: ncu of Mixtral-8x7B bf16 at 1024 tokens
# (256 +- 14 rows per expert), the two CUTLASS GEMMs (GEMM1 + activation, GEMM2) of one layer run under uniform
# and under balanced routing (exactly 256 rows per expert). `bash bench/results/2026-11-27-h100-padding-ncu/run.sh`
# from the repository root on the device (bench binary).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/ncu; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
for r in uniform balanced; do
  timeout 250 ncu --kernel-name device_kernel --launch-count 2 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section LaunchStats \
    $B/fusedmoe-bench --preset mixtral-8x7b --m 1024 --formats bf16 --routing $r --no-ceilings --no-check \
    --stage-runs 0 --warmup 0 --min-reps 1 --max-reps 1 --rotate 1 --out-dir /tmp/ncu_$r > $R/ncu_$r.txt 2>&1
  echo "$r rc=$? $(( $(date +%s)-t0 ))s"
done
for r in uniform balanced; do echo "== $r"; grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|DRAM Throughput|Executed Ipc Active|Issue Slots Busy|No Eligible|Active Warps Per Scheduler|Eligible Warps" $R/ncu_$r.txt; done
