set -u
# ncu of every kernel but the GEMMs (plan, gather, activation / quantise, finalize) at large batches.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/ncu; mkdir -p $R; nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio
run() { timeout 120 ncu --kernel-name regex:'^(?!.*(Gemm|gemm|GEMM|cutlass|device_kernel|stream_)).*' --launch-skip 0 --launch-count 14 --metrics $M \
  $PWD/.devcarry/bin/fusedmoe-bench --preset $1 --m $2 --formats $3 --no-check --no-ceilings --stage-runs 0 --max-minutes 0.1 --out-dir /tmp/ncu_x > $R/$1_$2_$3.txt 2>&1; echo "$1 $2 $3 rc=$?"; }
run deepseek-v3-tp8 1024 bf16
run deepseek-v3-tp8 4096 fp8-tensor
run deepseek-v3-tp1 4096 fp8-tensor
run qwen3-30b-a3b-tp1 4096 fp8-tensor
run mixtral-8x7b 1024 fp8-tensor
cd $OUT && tar czf ncu.tgz ncu && rm -rf ncu
