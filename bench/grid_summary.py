"""Per-point table of a bf16 / fp8 GPU-path grid against an earlier one (% of roofline, ratios,
per-point issue-3 targets met) and against the PyTorch peers timed in the same run (the best peer
of each point: bf16 against the bf16 peers, fp8-tensor / fp8-channel against the row-wise fp8
grouped GEMM), as the grid READMEs in bench/results quote it.

    python3 bench/grid_summary.py NEW/fusedmoe-bench.json OLD/fusedmoe-bench.json NEW/peers.json [OLD_NAME]

A JSON file stored gzipped in bench/results (NAME.json.gz) is read under either name.
"""
import math, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import load_json as load  # noqa: E402  (a JSON file or its .gz copy)

new = load(sys.argv[1])['points']
old = {(p['preset'], p['format'], p['M']): p for p in load(sys.argv[2])['points']}
peers = load(sys.argv[3])
old_name = sys.argv[4] if len(sys.argv) > 4 else 'old'
presets = ['mixtral-8x7b', 'qwen3-30b-a3b-tp1', 'deepseek-v3-tp1', 'deepseek-v3-tp8']
Ms = [1, 8, 64, 256, 1024, 4096]
fmts = ['bf16', 'fp8-tensor', 'fp8-channel', 'fp8-block']
idx = {(p['preset'], p['format'], p['M']): p for p in new}
print('| preset | format | ' + ' | '.join(f'M={m}' for m in Ms) + ' |')
print('|---|---|' + '---:|' * len(Ms))
for pr in presets:
    for f in fmts:
        cells = []
        for m in Ms:
            p = idx[(pr, f, m)]
            o = old.get((pr, f, m))
            cells.append(f"{p['median_ms']*1000:.1f} ({p['pct_roofline']:.1f}%)" + (f" [{o['pct_roofline']:.1f}]" if o else ''))
        print(f'| {pr} | {f} | ' + ' | '.join(cells) + ' |')
print()
for f in fmts:
    g = [idx[(pr, f, m)]['pct_roofline'] for pr in presets for m in Ms]
    go = [old[(pr, f, m)]['pct_roofline'] for pr in presets for m in Ms if (pr, f, m) in old]
    t = [idx[(pr, f, m)]['median_ms'] / old[(pr, f, m)]['median_ms'] for pr in presets for m in Ms if (pr, f, m) in old]
    met = sum(1 for pr in presets for m in Ms if idx[(pr, f, m)]['pct_roofline'] >= (80 if m >= 64 else 50))
    gm = lambda v: math.exp(sum(math.log(x) for x in v) / len(v))
    print(f"{f}: geomean {gm(g):.1f}% ({old_name} {gm(go):.1f}%), time vs {old_name} {gm(t):.3f} (M=4096 only {gm([idx[(pr,f,4096)]['median_ms']/old[(pr,f,4096)]['median_ms'] for pr in presets]):.3f}), per-point targets met {met}/24")

# The peers of the same run: peer time / fusedmoe time of the fastest peer at each point (> 1:
# fusedmoe faster). fp8-block has no PyTorch peer.
peer_format = {'bf16': 'bf16', 'fp8-tensor': 'fp8-rowwise', 'fp8-channel': 'fp8-rowwise'}
peer_points = peers['points'] if isinstance(peers, dict) else peers
print()
for f, pf in peer_format.items():
    best = {}
    for q in peer_points:
        if q.get('format') != pf or q.get('status') != 'OK':
            continue
        k = (q['preset'], int(q['M']))
        best[k] = min(best.get(k, float('inf')), q['median_ms'])
    r = [best[(pr, m)] / idx[(pr, f, m)]['median_ms'] for pr in presets for m in Ms if (pr, m) in best]
    if not r:
        print(f"{f}: no peer points")
        continue
    gm = math.exp(sum(math.log(x) for x in r) / len(r))
    print(f"{f}: faster than the best PyTorch peer at {sum(x > 1 for x in r)}/{len(r)} points, "
          f"geomean {gm:.2f}x, min {min(r):.2f}x")
