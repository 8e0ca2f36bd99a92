set -u
# ncu of the 4-bit mma kernel's GEMM1 (MXFP4 8-token instance) at Qwen3-30B-A3B 8 tokens, to find what bounds the
# decode-size GEMMs: warp-state (stall reason) totals, scheduler and memory sections, and the k loop's instructions
# with the most stall samples (source page, SASS). Binary: 14e0f30's bench, carried.
# `bash bench/results/2026-11-28-h200-w4-mma-stalls/run.sh`
mkdir -p /tmp/pb && tar xf .devcarry/pack/probe_bench.tgz -C /tmp/pb
B=/tmp/pb/bench O=$OUT/stalls
mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version --format=csv; echo "14e0f30"; date -u; } > $O/device.txt
for preset in qwen3-30b-a3b-tp1 deepseek-v3-tp1; do
  timeout 200 ncu --kernel-name regex:w4_mma_kernel --launch-count 1 --section WarpStateStats --section SchedulerStats \
    --section Occupancy --section MemoryWorkloadAnalysis --section SpeedOfLight --section SourceCounters \
    --import-source no -o /tmp/rep_$preset $B --preset $preset --m 8 --formats mxfp4 --no-ceilings --warmup 0 \
    --min-reps 1 --max-reps 1 --stage-runs 0 --check-tokens 1 --rotate 1 --graph-max-m 0 --out-dir /tmp/d_$preset \
    > $O/ncu_$preset.log 2>&1
  echo "ncu $preset rc=$?"
  ncu --import /tmp/rep_$preset.ncu-rep --page details > $O/details_$preset.txt 2>&1
  ncu --import /tmp/rep_$preset.ncu-rep --page source --csv --print-source sass > /tmp/src_$preset.csv 2>&1
  python3 - "$preset" <<'PY' > $O/top_stalls_$preset.txt 2>&1
import csv, sys
rows = list(csv.reader(open(f"/tmp/src_{sys.argv[1]}.csv")))
hdr = next(i for i, r in enumerate(rows) if any("Source" == c or c.startswith("Source") for c in r))
h = rows[hdr]
print(" | ".join(h))
def num(x):
    try: return float(x.replace(",", ""))
    except Exception: return 0.0
col = next((i for i, c in enumerate(h) if "Warp Stall Sampling (All" in c), None)
body = [r for r in rows[hdr + 1:] if len(r) == len(h)]
if col is None:
    print("no stall sampling column; columns:", h)
else:
    tot = sum(num(r[col]) for r in body)
    print(f"total samples {tot:.0f}, instructions {len(body)}")
    for r in sorted(body, key=lambda r: -num(r[col]))[:60]:
        print(" | ".join(r))
PY
  gzip -9 -c /tmp/src_$preset.csv > $O/source_$preset.csv.gz
done
