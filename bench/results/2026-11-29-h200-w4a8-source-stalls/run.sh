#!/usr/bin/env bash
# Where W4A8's 8-token GEMM1 waits (ncu source counters: stall samples per SASS instruction) at Qwen3-30B-A3B and
# DeepSeek-V3 TP1, 8 tokens. `bash bench/results/2026-11-29-h200-w4a8-source-stalls/run.sh` from the repository root
# on the device (pack carried).
set -u
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=.devcarry/bin/bench O=$OUT/src
mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version --format=csv; cat .devcarry/bin/sha; date -u; } > $O/device.txt
for p in qwen3-30b-a3b-tp1 deepseek-v3-tp1; do
  timeout 150 ncu --kernel-name regex:w4_mma_kernel --launch-count 1 --section SourceCounters --section WarpStateStats \
    -o /tmp/rep_$p $B --preset $p --m 8 --formats w4a8-int4 --no-ceilings --warmup 0 --min-reps 1 --max-reps 1 \
    --stage-runs 0 --check-tokens 1 --rotate 1 --graph-max-m 0 --out-dir /tmp/d_$p > $O/ncu_$p.log 2>&1
  echo "ncu $p rc=$?"
  ncu --import /tmp/rep_$p.ncu-rep --page source --print-source sass --csv > $O/source_$p.csv 2> $O/source_$p.err
  echo "source $p rc=$? $(wc -c < $O/source_$p.csv)"
done
tar czf $OUT/src.tgz -C $OUT src && rm -rf $O
