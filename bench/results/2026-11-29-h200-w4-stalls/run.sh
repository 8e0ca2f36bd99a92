#!/usr/bin/env bash
# Stall reasons (ncu WarpStateStats, raw metrics) of the first w4_mma_kernel launch (GEMM1) of decode-size layers:
# MXFP4 lean 8-token tile (mxfp4-fp8: GEMM1 without the fused activation) at Qwen3-30B-A3B 8 tokens (k = 2048, the
# plain instance) and DeepSeek-V3 TP1 8 tokens (k = 7168, kFullK), W4A8 at the same two points.
# `bash bench/results/2026-11-29-h200-w4-stalls/run.sh` from the repository root on the device (pack carried).
set -u
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=.devcarry/bin/bench O=$OUT/stalls
mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version --format=csv; cat .devcarry/bin/sha; date -u; } > $O/device.txt
for spec in "qwen3-30b-a3b-tp1 mxfp4-fp8" "deepseek-v3-tp1 mxfp4-fp8" "qwen3-30b-a3b-tp1 w4a8-int4" "deepseek-v3-tp1 w4a8-int4"; do
  set -- $spec
  n=$1_$2
  timeout 120 ncu --kernel-name regex:w4_mma_kernel --launch-count 1 --section WarpStateStats --section SchedulerStats \
    --section InstructionStats --section LaunchStats --section Occupancy --section SpeedOfLight --page raw --csv \
    $B --preset $1 --m 8 --formats $2 --no-ceilings --warmup 0 --min-reps 1 --max-reps 1 --stage-runs 0 \
    --check-tokens 1 --rotate 1 --graph-max-m 0 --out-dir /tmp/d_$n > $O/raw_$n.csv 2> $O/ncu_$n.log
  echo "ncu $n rc=$?"
done
tar czf $OUT/stalls.tgz -C $OUT stalls && rm -rf $O
