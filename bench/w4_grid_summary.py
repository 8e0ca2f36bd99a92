"""Summary of a 4-bit grid (issue 6): every point with % of roofline, % of the tensor-core rate,
the best peer of the same run and the ratio to an older grid's time (a different run: indicative
only), then the issue-6 targets per preset and format (grids without 4096 tokens show '-').

    python3 bench/w4_grid_summary.py fusedmoe-bench.json peers.json [OLD_fusedmoe-bench.json] > summary.md

A JSON file stored gzipped in bench/results (NAME.json.gz) is read under either name.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import load_json  # noqa: E402  (a JSON file or its .gz copy)

cur = load_json(sys.argv[1])
peers = load_json(sys.argv[2])
old = load_json(sys.argv[3]) if len(sys.argv) > 3 else None
ceil = cur["ceilings"]


def key(p):
    return (p["preset"], p["format"], p["M"])


old_t = {key(p): p["median_ms"] for p in old["points"] if p.get("status") in ("ok", "OK")} if old else {}
# The peers run the layer on weights dequantised ahead of time (bench/report.py PEER_COMPARE):
# bf16, and ready fp8 for the fp8-activation formats.
PEER_FORMATS = {"mxfp4": ["bf16"], "nvfp4": ["bf16"], "nvfp4-w4a4": ["bf16"], "mxfp4-fp8": ["bf16", "fp8-rowwise"],
                "w4a8-int4": ["bf16", "fp8-rowwise"]}
by_peer_format = {}
for r in peers.get("points", []):
    if r.get("status") not in ("ok", "OK") or not r.get("median_ms"):
        continue
    k = (r["preset"], r["format"], r["M"])
    if k not in by_peer_format or r["median_ms"] < by_peer_format[k][0]:
        by_peer_format[k] = (r["median_ms"], r["peer"] + ("" if r["format"] == "bf16" else " " + r["format"]))
best = {}
for p in cur["points"]:
    for f in PEER_FORMATS.get(p["format"], []):
        b = by_peer_format.get((p["preset"], f, p["M"]))
        k = (p["preset"], p["format"], p["M"])
        if b and (k not in best or b[0] < best[k][0]):
            best[k] = b
print("| preset | format | M | time us | % roofline | bound | % of tensor rate | best peer / fusedmoe | vs old time |")
print("|---|---|---:|---:|---:|---|---:|---:|---:|")
rows = []
for p in cur["points"]:
    if p.get("status") not in ("ok", "OK"):
        continue
    k = key(p)
    rate = p["tflops"] / (ceil["bf16_tflops"] if p["rate_class"] in ("bf16", "fp16") else max(ceil["fp8_tflops"], ceil["fp8_fast_accum_tflops"])) * 100
    b = best.get(k)
    o = old_t.get(k)
    rows.append((p, rate, b, o))
    vs_old = f"{p['median_ms'] / o:.3f}" if o else "-"  # no older grid given, or the point not in it
    print(f"| {p['preset']} | {p['format']} | {p['M']} | {p['median_ms'] * 1000:.1f} | {p['pct_roofline']:.1f} | {p['bound']} | {rate:.1f} | "
          f"{(b[0] / p['median_ms']) if b else float('nan'):.2f}x ({b[1] if b else '-'}) | {vs_old} |")
faster = [(b[0] / p["median_ms"]) for p, r, b, o in rows if b]
import math
print()
if faster:
    print(f"Faster than the best peer at {sum(1 for x in faster if x > 1)}/{len(faster)} points; geomean best peer / fusedmoe "
          f"{math.exp(sum(math.log(x) for x in faster) / len(faster)):.2f}x.")
else:
    print("No peer timed at any of these points.")
print()
print("Issue 6 targets (decode: % of roofline; M = 4096: % of the tensor-core rate of the type used):")
print()
print("| preset | format | M=1 (50) | 8 <= M <= 64 (75) | M=4096 rate (50) |")
print("|---|---|---:|---:|---:|")
for pre in dict.fromkeys(p["preset"] for p, *_ in rows):
    for fmt in dict.fromkeys(p["format"] for p, *_ in rows if p["preset"] == pre):
        pts = {p["M"]: (p, r) for p, r, *_ in rows if p["preset"] == pre and p["format"] == fmt}
        dec = [pts[m][0]["pct_roofline"] for m in (8, 64) if m in pts]
        big = f"{pts[4096][1]:.1f}" if 4096 in pts else "-"  # grids without 4096 tokens
        print(f"| {pre} | {fmt} | {pts[1][0]['pct_roofline']:.1f} | {min(dec):.1f}-{max(dec):.1f} | {big} |")
