#!/usr/bin/env bash
# r3: the DeepSeek-V3 TP1 4096-token points with ~200 reps each instead of the grid's ~15 (--target-ms 1500), ceilings
# measured in the same process, oracle check of 2 tokens, nvidia-smi sampling as in run.sh.
# `bash bench/results/2026-11-29-h200-deepseek-4096-modes/run3.sh` from the repository root on the device (pack carried).
set -u
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
O=$OUT/long && mkdir -p "$O"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 100 > "$O/smi.csv" 2>&1 &
smi=$!
.devcarry/bin/bench --preset deepseek-v3-tp1 --m 4096 --formats mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4 --routing uniform \
  --check-tokens 2 --stage-runs 3 --target-ms 1500 --max-reps 200 --commit "$(cat .devcarry/bin/sha)" --out-dir "$O" \
  > "$O/bench.log" 2>&1
echo "bench rc=$?"
kill $smi
python3 - "$O/fusedmoe-bench.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
bf16 = d["ceilings"]["bf16_tflops"]
print(f"BF16 ceiling {bf16:.0f} TFLOP/s")
for p in d["points"]:
    print(p["format"], p["status"], p["reps"], "median %.1f p10 %.1f p90 %.1f us" % tuple(1e3 * p[k] for k in ("median_ms", "p10_ms", "p90_ms")),
          "%.1f%% of BF16 (median), %.1f%% (p10)" % (100 * p["roofline_ms"] / p["median_ms"], 100 * p["roofline_ms"] / p["p10_ms"]))
PY
rm -rf "$O/routing"
tar czf "$OUT/long.tgz" -C "$OUT" long && rm -rf "$O"
