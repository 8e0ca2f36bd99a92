#!/usr/bin/env bash
# Why DeepSeek-V3 TP1's one-token W4A8 GEMM1 is ~10% slower than the e2m1 formats' (session-end grids: stage ~49.8
# against 43.9-47.0 us for fewer bytes): ncu of the first w4_mma_kernel launch (GEMM1) of a one-token layer, w4a8-int4
# against mxfp4-fp8 (the same per-token fp8 activations; its GEMM1 without the fused activation too) - speed of light,
# warp states, scheduler, occupancy, launch and instruction statistics.
# `bash bench/results/2026-11-29-h200-w4a8-one-token-ncu/run.sh` from the repository root on the device (pack carried).
set -u
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=.devcarry/bin/bench O=$OUT/ncu
mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version --format=csv; cat .devcarry/bin/sha; date -u; } > $O/device.txt
for f in w4a8-int4 mxfp4-fp8 mxfp4; do
  timeout 150 ncu --kernel-name regex:w4_mma_kernel --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats \
    --section MemoryWorkloadAnalysis -o /tmp/rep_$f $B --preset deepseek-v3-tp1 --m 1 --formats $f --no-ceilings \
    --warmup 0 --min-reps 1 --max-reps 1 --stage-runs 0 --check-tokens 1 --rotate 1 --graph-max-m 0 \
    --out-dir /tmp/d_$f > $O/ncu_$f.log 2>&1
  echo "ncu $f rc=$?"
  ncu --import /tmp/rep_$f.ncu-rep --page details > $O/details_$f.txt 2>&1
  grep -E "Function Name|Duration|Registers Per|Executed Instructions |DRAM Throughput|Achieved Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Block Size|Grid Size|Theoretical Occupancy" $O/details_$f.txt | head -20
done
tar czf $OUT/ncu.tgz -C $OUT ncu && rm -rf $O
