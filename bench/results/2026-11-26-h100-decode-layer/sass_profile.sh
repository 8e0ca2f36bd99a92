set -u
# Per-SASS-instruction stall sampling of the one-token kernel (Qwen3-30B-A3B fp8-tensor, one token).
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/s; mkdir -p $R; B=$PWD/.devcarry/bin
timeout 120 ncu --kernel-name regex:decode_layer --launch-skip 5 --launch-count 1 --section SourceCounters --section WarpStateStats \
  --page source --print-source sass --csv \
  $B/fusedmoe-bench --preset qwen3-30b-a3b-tp1 --m 1 --formats fp8-tensor --no-ceilings --stage-runs 0 --check-tokens 1 --max-reps 10 --graph-max-m 0 --out-dir /tmp/b > $R/sass.csv 2> $R/sass.err
echo "rc=$? $(wc -l < $R/sass.csv) lines"; head -c 600 $R/sass.csv; gzip -9 $R/sass.csv
