set -u
# ncu of the stream GEMM kernels (64-row token tile) at 16-32 rows per expert: why fp8 streams its
# weights slower than bf16 (2.69 against 2.9 TB/s at Qwen3-30B-A3B 256 tokens).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/ncu; mkdir -p $R; nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active
run() { timeout 120 ncu --cache-control none --kernel-name regex:'stream_gemm' --launch-skip 0 --launch-count 2 --metrics $M --section WarpStateStats --section SchedulerStats \
  $PWD/.devcarry/bin/fusedmoe-bench --preset $1 --m $2 --formats $3 --no-check --no-ceilings --stage-runs 0 --max-minutes 0.1 --out-dir /tmp/ncu_x > $R/$1_$2_$3.txt 2>&1; echo "$1 $2 $3 rc=$?"; }
run qwen3-30b-a3b-tp1 256 bf16
run qwen3-30b-a3b-tp1 256 fp8-tensor
run deepseek-v3-tp8 1024 bf16
run deepseek-v3-tp8 1024 fp8-tensor
cd $OUT && tar czf ncu.tgz ncu && rm -rf ncu
