set -u
# ncu of the MXFP4 GEMM2 (w4_wgmma_kernel<MXFP4, F32>) at DeepSeek-V3 TP1 and Qwen3, 4096 tokens: c11c841 (bin_base) vs trial 1 (bin).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/ncu1; mkdir -p $R; nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,dram__bytes_read.sum,lts__t_bytes.sum,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active
for P in deepseek-v3-tp1 qwen3-30b-a3b-tp1; do
  for V in bin_base bin; do
    timeout 100 ncu --kernel-name-base mangled --kernel-name regex:w4_wgmma_kernelILi1ELNS1_5W4OutE0 --launch-count 1 --metrics $M \
      $PWD/.devcarry/$V/fusedmoe-bench --preset $P --m 4096 --formats mxfp4 --no-check --no-ceilings --stage-runs 0 --max-minutes 0.2 --out-dir /tmp/ncu_$V > $R/${P}_$V.txt 2>&1
    echo "$P $V rc=$?"
  done
done
cd $OUT && tar czf ncu1.tgz ncu1 && rm -rf ncu1
