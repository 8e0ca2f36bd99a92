set -u
# Per-SASS-instruction stall sampling of the 4-bit one-token kernel at 52cb5cd (gpt-oss-120b and Qwen3 mxfp4, one token).
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/s; mkdir -p $R; B=$PWD/.devcarry/bin
for P in gpt-oss-120b qwen3-30b-a3b-tp1; do
timeout 120 ncu --kernel-name regex:decode_layer --launch-skip 5 --launch-count 1 --section SourceCounters --section WarpStateStats --section ComputeWorkloadAnalysis --section InstructionStats \
  --page source --print-source sass --csv \
  $B/fusedmoe-bench --preset $P --m 1 --formats mxfp4 --no-ceilings --stage-runs 0 --check-tokens 1 --max-reps 10 --graph-max-m 0 --out-dir /tmp/b > $R/sass_$P.csv 2> $R/sass_$P.err
echo "rc=$? $(wc -l < $R/sass_$P.csv) lines"; gzip -9 $R/sass_$P.csv
timeout 60 ncu --kernel-name regex:decode_layer --launch-skip 5 --launch-count 1 --section ComputeWorkloadAnalysis --section InstructionStats --section WarpStateStats --section SchedulerStats \
  $B/fusedmoe-bench --preset $P --m 1 --formats mxfp4 --no-ceilings --stage-runs 0 --check-tokens 1 --max-reps 10 --graph-max-m 0 --out-dir /tmp/b > $R/pipes_$P.txt 2>&1
done
