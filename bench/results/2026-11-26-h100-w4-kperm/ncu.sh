set -u
# ncu of the MXFP4 GEMM2 (w4_wgmma_kernel<MXFP4, F32>) at gpt-oss-120b and DeepSeek-V3 TP1, 4096
# tokens: old (bin_old) and new (bin) binaries. `bash ncu.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/ncu; mkdir -p $R; nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt
M=sm__cycles_elapsed.avg,gpu__time_duration.sum,smsp__inst_executed.sum,dram__bytes_read.sum,lts__t_bytes.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
for P in gpt-oss-120b deepseek-v3-tp1; do
  for V in bin_old bin; do
    timeout 120 ncu --kernel-name-base mangled --kernel-name regex:w4_wgmma_kernelILi1ELNS1_5W4OutE0 --launch-count 1 \
      --metrics $M $PWD/.devcarry/$V/fusedmoe-bench --preset $P --m 4096 --formats mxfp4 --no-check --no-ceilings \
      --stage-runs 0 --max-minutes 0.2 --out-dir /tmp/ncu_$V > $R/${P}_$V.txt 2>&1
    echo "$P $V rc=$?"
  done
done
cd $OUT && tar czf ncu.tgz ncu && rm -rf ncu
