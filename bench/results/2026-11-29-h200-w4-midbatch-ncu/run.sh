#!/usr/bin/env bash
# ncu (full set) of the 4-bit mma kernel's GEMM1 and GEMM2 on DeepSeek-V3 TP1 mxfp4 at 512 tokens (16 rows per expert:
# the 32-token kSx tile; the layer at ~35% of the 4-bit roofline) and at 64 tokens (2 rows: the 8-token tile; ~63%), to
# see what holds the mid-batch GEMMs. `bash bench/results/2026-11-29-h200-w4-midbatch-ncu/run.sh` from the repository
# root on the device (binaries carried).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
for m in 512 64; do
  A="--formats mxfp4 --m $m --warmup 1 --min-reps 1 --max-reps 1 --stage-runs 0 --no-check --no-ceilings --rotate 1 --out-dir /tmp/ncu_out_$m"
  timeout 200 ncu --set full --import-source no -k regex:'w4_mma_kernel' --launch-skip 2 --launch-count 2 -o /tmp/mb_$m \
    .devcarry/bin/bench --preset deepseek-v3-tp1 $A > "$OUT/ncu_run_$m.log" 2>&1
  echo "ncu $m rc=$?"
  ncu -i /tmp/mb_$m.ncu-rep --page details > "$OUT/details_$m.txt" 2>&1
  grep -E "w4_mma_kernel|Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Issue Slots Busy|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Warp Cycles Per Issued|Executed Ipc A" "$OUT/details_$m.txt" | head -60
done
