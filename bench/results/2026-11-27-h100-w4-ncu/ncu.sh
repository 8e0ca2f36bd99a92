set -u
# ncu of the 4-bit wgmma kernels (GEMM1 + activation, GEMM2) at 4096 tokens, binaries of .devcarry/sha8.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/ncu; mkdir -p $R; nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat .devcarry/sha8 >> $R/device.txt
M=gpu__time_duration.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio
for P in qwen3-30b-a3b-tp1 gpt-oss-120b deepseek-v3-tp1; do
  timeout 100 ncu --kernel-name-base mangled --kernel-name regex:w4_wgmma_kernel --launch-count 2 --metrics $M \
    $PWD/.devcarry/bin/fusedmoe-bench --preset $P --m 4096 --formats mxfp4 --no-check --no-ceilings --stage-runs 0 --max-minutes 0.1 --out-dir /tmp/ncu_w > $R/${P}_mxfp4.txt 2>&1
  echo "$P rc=$?"
done
cd $OUT && tar czf ncu.tgz ncu && rm -rf ncu
