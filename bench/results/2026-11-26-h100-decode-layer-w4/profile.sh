set -u
# ncu of the one-token 4-bit kernel (duration, DRAM, stalls) and per-SASS-instruction stall sampling (Qwen3 mxfp4).
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/p; mkdir -p $R; t0=$(date +%s)
for PF in qwen3-30b-a3b-tp1:mxfp4 gpt-oss-120b:mxfp4; do P=${PF%%:*}; F=${PF##*:}
  timeout 90 ncu --kernel-name regex:decode_layer --launch-skip 5 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    $B/fusedmoe-bench --preset $P --m 1 --formats $F --no-ceilings --stage-runs 0 --check-tokens 1 --max-reps 10 --graph-max-m 0 --out-dir /tmp/b > $R/ncu_${P}_$F.txt 2>&1
  echo "$P $F ncu rc=$? $(( $(date +%s)-t0 ))s"
  grep -E "Duration|dram__bytes_read.sum|DRAM Throughput|Registers|Achieved Occupancy|Stall|Warp Cycles Per Issued|Block Limit|Shared Memory" $R/ncu_${P}_$F.txt | head -20
done
timeout 120 ncu --kernel-name regex:decode_layer --launch-skip 5 --launch-count 1 --section SourceCounters --section WarpStateStats \
  --page source --print-source sass --csv \
  $B/fusedmoe-bench --preset qwen3-30b-a3b-tp1 --m 1 --formats mxfp4 --no-ceilings --stage-runs 0 --check-tokens 1 --max-reps 10 --graph-max-m 0 --out-dir /tmp/b > $R/sass.csv 2> $R/sass.err
echo "sass rc=$? $(wc -l < $R/sass.csv) lines"; gzip -9 $R/sass.csv
