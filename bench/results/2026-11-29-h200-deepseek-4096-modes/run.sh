#!/usr/bin/env bash
# Why DeepSeek-V3 TP1 at 4096 tokens is bimodal run to run (the same binary at ~6700 or ~7070 us for mxfp4-fp8): the
# point timed alone in 8 separate bench processes, nvidia-smi sampling SM clock, power, temperature and throttle
# reasons every 100 ms; each run's wall-clock window is logged so the samples can be matched to it.
# `bash bench/results/2026-11-29-h200-deepseek-4096-modes/run.sh` from the repository root on the device (pack carried).
set -u
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
O=$OUT/modes && mkdir -p "$O"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 100 > "$O/smi.csv" 2>&1 &
smi=$!
for i in 1 2 3 4 5 6 7 8; do
  f=mxfp4-fp8; [ $((i % 2)) -eq 0 ] && f=mxfp4
  t0=$(date +%s.%N)
  .devcarry/bin/bench --preset deepseek-v3-tp1 --m 4096 --formats $f --routing uniform --no-ceilings --no-check \
    --stage-runs 0 --max-minutes ${MODES_MINUTES:-0.3} --out-dir /tmp/modes_$i > "$O/run_$i.log" 2>&1
  t1=$(date +%s.%N)
  med=$(python3 -c "import json;d=json.load(open('/tmp/modes_$i/fusedmoe-bench.json'));p=d['points'][0];print(p['format'],round(p['median_ms']*1000,1),round(p['p10_ms']*1000,1),round(p['p90_ms']*1000,1),p['reps'])")
  echo "run $i $t0 $t1 $med" | tee -a "$O/runs.txt"
done
kill $smi
tar czf "$OUT/modes.tgz" -C "$OUT" modes && rm -rf "$O"
