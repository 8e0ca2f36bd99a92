set -u
# ncu of the stream GEMM's tall (256-row) token tile: where a losing call (DeepSeek-V3 TP8 GEMM1 + activation at 4096
# tokens, fp8-tensor, FUSEDMOE_STREAM_TALL=512) and a winning one (Mixtral-8x7B GEMM2 at 512 tokens, bf16, the default
# rule) spend their time. `bash bench/results/2026-11-27-h100-tall-ncu/ncu.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/ncu; mkdir -p $R; nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,sm__cycles_active.avg
run() { timeout 150 env $4 ncu --cache-control none --kernel-name regex:'stream_gemm' --launch-skip 0 --launch-count 1 --metrics $M --section WarpStateStats --section SchedulerStats --section SourceCounters \
  $PWD/.devcarry/bin/fusedmoe-bench --preset $1 --m $2 --formats $3 --no-check --no-ceilings --stage-runs 0 --max-minutes 0.05 --out-dir /tmp/ncu_x > $R/$1_$2_$3.txt 2>&1; echo "$1 $2 $3 rc=$?"; }
run deepseek-v3-tp8 4096 fp8-tensor FUSEDMOE_STREAM_TALL=512
run mixtral-8x7b 512 bf16 FUSEDMOE_STREAM_TALL=12288
run deepseek-v3-tp8 1024 fp8-tensor FUSEDMOE_STREAM_TALL=0
cd $OUT && tar czf ncu.tgz ncu && rm -rf ncu
