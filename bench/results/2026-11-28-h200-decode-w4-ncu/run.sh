#!/usr/bin/env bash
# ncu (full set, SASS-level stall samples) of the one-token 4-bit layer kernel (decode_layer_w4.cu) on Qwen3-30B-A3B
# mxfp4, where one token runs at ~21% of the 4-bit roofline. `bash bench/results/2026-11-28-h200-decode-w4-ncu/run.sh`.
tar xf .devcarry/pack/bins.tgz -C .devcarry
A="--formats mxfp4 --m 1 --warmup 2 --min-reps 1 --max-reps 1 --stage-runs 0 --no-check --no-ceilings --rotate 1 --out-dir /tmp/ncu_out"
timeout 300 ncu --set full --import-source no -k regex:'decode_layer' --launch-skip 2 --launch-count 1 -o /tmp/dl_qwen3 \
  .devcarry/bin/bench --preset qwen3-30b-a3b-tp1 $A > "$OUT/ncu_run.log" 2>&1
echo "ncu rc=$?"
ncu -i /tmp/dl_qwen3.ncu-rep --page details > "$OUT/details.txt" 2>&1
ncu -i /tmp/dl_qwen3.ncu-rep --page source --csv --print-source sass > /tmp/sass.csv 2>&1
gzip -c /tmp/sass.csv > "$OUT/sass.csv.gz"
grep -E "Duration|DRAM Throughput|Issue Slots|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Stall" "$OUT/details.txt" | head -40
