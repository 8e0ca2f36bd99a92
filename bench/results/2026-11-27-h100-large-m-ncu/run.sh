set -u
# What bounds the CUTLASS large-M GEMMs where the layer is compute-bound on paper: ncu of GEMM1 (+ activation)
# and GEMM2 of one layer run, Qwen3-30B-A3B at 4096 tokens (256 +- 16 rows per expert; fp8-tensor 36.7%,
# bf16 48.3% of roofline in the 8f3e2de grid) and DeepSeek-V3 TP8 at 4096 tokens (fp8-tensor 46.1%).
# `bash bench/results/2026-11-27-h100-large-m-ncu/run.sh` from the repository root on the device (bench binary).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/ncu; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
one() {  # name preset format
  timeout 200 ncu --kernel-name device_kernel --launch-count 2 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section LaunchStats \
    --section Occupancy --section InstructionStats \
    --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio \
    $B/fusedmoe-bench --preset $2 --m 4096 --formats $3 --routing uniform --no-ceilings --no-check \
    --stage-runs 0 --warmup 0 --min-reps 1 --max-reps 1 --rotate 1 --out-dir /tmp/ncu_$1 > $R/ncu_$1.txt 2>&1
  echo "$1 rc=$? $(( $(date +%s)-t0 ))s"
}
one qwen3_fp8 qwen3-30b-a3b-tp1 fp8-tensor
one qwen3_bf16 qwen3-30b-a3b-tp1 bf16
one ds8_fp8 deepseek-v3-tp8 fp8-tensor
for f in $R/ncu_*.txt; do echo "== $f"; grep -E "Duration|Compute \(SM\) Throughput|DRAM Throughput|L2 Cache Throughput|Executed Ipc Active|Issue Slots Busy|No Eligible|Active Warps Per Scheduler|Eligible Warps|gmma|dram__bytes|lts__t_sectors_srcunit|Registers Per|Block Size|Grid Size|stalled_(long|barrier|wait|math|dispatch|mio|lg|short|sleep|branch)" $f; done
gzip $R/ncu_*.txt
