set -u
# ncu of the GEMM kernels at the 1024-token ridge points: DRAM bytes against the weight bytes.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/ncu; mkdir -p $R; nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat .devcarry/bin_base/sha >> $R/device.txt
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,launch__grid_size,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed
run() { timeout 150 ncu --cache-control none --kernel-name regex:'(device_kernel|stream_gemm|Gemm)' --launch-skip 0 --launch-count 4 --metrics $M \
  $PWD/.devcarry/bin_base/fusedmoe-bench --preset $1 --m $2 --formats $3 --no-check --no-ceilings --stage-runs 0 --max-minutes 0.1 --out-dir /tmp/ncu_x > $R/$1_$2_$3.txt 2>&1; echo "$1 $2 $3 rc=$?"; }
run mixtral-8x7b 1024 bf16
run mixtral-8x7b 1024 fp8-tensor
run qwen3-30b-a3b-tp1 1024 fp8-tensor
run deepseek-v3-tp8 1024 fp8-tensor
run qwen3-30b-a3b-tp1 4096 fp8-tensor
cd $OUT && tar czf ncu.tgz ncu && rm -rf ncu
