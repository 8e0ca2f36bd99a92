#!/usr/bin/env bash
# ncu of the finalize and permute kernels at 4096 tokens (Qwen3-30B-A3B mxfp4, DeepSeek-V3 TP1 mxfp4): why the top-k
# sum streams y at ~2 TB/s. `bash bench/results/2026-11-28-h200-finalize-ncu/run.sh` from the repository root.
tar xf .devcarry/pack/bins.tgz -C .devcarry
B=.devcarry/bin/bench
A="--formats mxfp4 --m 4096 --warmup 0 --min-reps 1 --max-reps 1 --stage-runs 0 --no-check --no-ceilings --rotate 1 --flush-mb 0 --out-dir /tmp/ncu_out"
for preset in qwen3-30b-a3b-tp1 deepseek-v3-tp1; do
  timeout 200 ncu --kernel-name regex:'finalize_vec|gather' --launch-count 2 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    --section WarpStateStats --section SchedulerStats $B --preset $preset $A > "$OUT/ncu_$preset.txt" 2>&1
  echo "$preset rc=$?"; grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Block Limit|Stall|Warp Cycles Per Issued" "$OUT/ncu_$preset.txt" | head -60
done
