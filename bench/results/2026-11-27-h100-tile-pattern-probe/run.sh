set -u
# Where GEMM1's extra DRAM reads under uniform routing come from (../2026-11-27-h100-padding-ncu: Mixtral-8x7B
# bf16 1024 tokens, 2.46 GB read under uniform routing against 1.98 GB balanced; weights 1.88 GB). Balanced routing
# gives every expert exactly slots / E rows, so M picks the tile pattern: 1024 tokens 256 rows (2 full 128-row
# tiles per weight column), 1020 tokens 255 rows (2 tiles, the second 127 rows), 1028 tokens 257 rows (3 tiles,
# the third 1 row) - the same pattern for every column, against uniform routing's mix of 2- and 3-tile columns.
# If the mix is what re-reads weights (CTAs that share a column change from round to round and drift apart),
# 1028 balanced reads the weights about once; if the nearly empty tile itself does, it reads them ~1.5 times.
# Same for Qwen3-30B-A3B fp8-tensor at 4096 / 4112 tokens (256 / 257 rows). ncu metrics of the CUTLASS kernels
# (GEMM1 + activation, GEMM2) of one layer run, then the layer times of the same points.
# `bash bench/results/2026-11-27-h100-tile-pattern-probe/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/probe; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
M="gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"
one() {  # preset format m routing
  timeout 120 ncu --kernel-name device_kernel --launch-count 2 --metrics $M \
    $B/fusedmoe-bench --preset $1 --m $3 --formats $2 --routing $4 --no-ceilings --no-check \
    --stage-runs 0 --warmup 0 --min-reps 1 --max-reps 1 --rotate 1 --out-dir /tmp/ncu_x > /tmp/ncu_one.txt 2>&1
  echo "== $1 $2 M=$3 $4 rc=$?"
  grep -E "device_kernel|gpu__time|dram__bytes|hit_rate|sm__throughput|dram_throughput" /tmp/ncu_one.txt | sed 's/^ *//'
}
{
for m in 1024:uniform 1024:balanced 1020:balanced 1028:balanced; do one mixtral-8x7b bf16 ${m%%:*} ${m##*:}; done
for m in 4096:uniform 4096:balanced 4112:balanced; do one qwen3-30b-a3b-tp1 fp8-tensor ${m%%:*} ${m##*:}; done
} > $R/ncu.txt 2>&1
echo "ncu $(( $(date +%s)-t0 ))s"
timeout 200 $B/fusedmoe-bench --preset mixtral-8x7b --m 1020,1024,1028 --formats bf16,fp8-tensor --routing uniform,balanced \
  --no-ceilings --check-tokens 2 --stage-runs 2 --max-minutes 1.2 --out-dir /tmp/tp_mix > $R/bench_mixtral.log 2>&1
echo "bench mixtral rc=$? $(( $(date +%s)-t0 ))s"
timeout 150 $B/fusedmoe-bench --preset qwen3-30b-a3b-tp1 --m 4096,4112 --formats bf16,fp8-tensor --routing uniform,balanced \
  --no-ceilings --check-tokens 2 --stage-runs 2 --max-minutes 1 --out-dir /tmp/tp_qw > $R/bench_qwen3.log 2>&1
echo "bench qwen3 rc=$? $(( $(date +%s)-t0 ))s"
cp /tmp/tp_mix/fusedmoe-bench.json $R/mixtral.json; cp /tmp/tp_qw/fusedmoe-bench.json $R/qwen3.json
cat $R/ncu.txt
