set -u
# ncu of the one-token layer kernel (caches flushed by ncu): duration, DRAM bytes and rate, stalls.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/p; mkdir -p $R; t0=$(date +%s)
for PF in qwen3-30b-a3b-tp1:fp8-tensor qwen3-30b-a3b-tp1:bf16 deepseek-v3-tp8:fp8-tensor; do P=${PF%%:*}; F=${PF##*:}
  timeout 90 ncu --kernel-name regex:decode_layer --launch-skip 5 --launch-count 3 --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    $B/fusedmoe-bench --preset $P --m 1 --formats $F --no-ceilings --stage-runs 0 --check-tokens 1 --max-reps 10 --graph-max-m 0 --flush-mb 0 --out-dir /tmp/b > $R/ncu_${P}_$F.txt 2>&1
  echo "$P $F ncu rc=$? $(( $(date +%s)-t0 ))s"
  grep -E "Duration|dram__bytes_read.sum|DRAM Throughput|Registers|Achieved Occupancy|Stall|Warp Cycles Per Issued" $R/ncu_${P}_$F.txt | head -14
done
