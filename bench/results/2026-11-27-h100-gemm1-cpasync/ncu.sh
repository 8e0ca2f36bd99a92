set -u
# ncu of the fused GEMM1 + activation kernel with the permuted operand (FUSEDMOE_GEMM1_GATHER=0)
# and with its A rows gathered by cp.async: where does the gathered kernel lose at Mixtral?
# `bash bench/results/2026-11-27-h100-gemm1-cpasync/ncu.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/ncu; mkdir -p $R; nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
M=gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__throughput.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,sm__inst_executed.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio
run() { timeout 150 env FUSEDMOE_GEMM1_GATHER=$4 ncu --cache-control none --kernel-name-base mangled --kernel-name regex:'GatherAMainloop' --launch-skip 1 --launch-count 1 --metrics $M \
  $PWD/.devcarry/bin/fusedmoe-bench --preset $1 --m $2 --formats $3 --no-check --no-ceilings --stage-runs 0 --max-minutes 0.1 --out-dir /tmp/ncu_x > $R/$1_$2_$3_g$4.txt 2>&1; echo "$1 $2 $3 gather=$4 rc=$?"; }
for g in 0 1; do
run mixtral-8x7b 1024 bf16 $g
run qwen3-30b-a3b-tp1 4096 fp8-tensor $g
run deepseek-v3-tp8 4096 bf16 $g
done
for f in $R/*_g*.txt; do echo "== $f"; grep -E "^\s+(gpu__|sm__|l1tex|lts|dram|smsp)" $f; done
cd $OUT && tar czf ncu.tgz ncu && rm -rf ncu
