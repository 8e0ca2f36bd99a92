"""What a grid point can reach with GEMM2's y written and read back: the floor and the cap on % of roofline.

The roofline of the benchmark (and of issues 3, 5, 6) counts the weights of the experts hit plus the
activations in and out, against the measured HBM read bandwidth, or the FLOPs against the measured matmul
rate. A layer whose top-k sum is deterministic (fixed slot order, no atomics: the issues' own rule) and runs
after GEMM2 must also write GEMM2's output y ([tokens x topk, hidden]) and read it back: 2 bytes per value
for the 16-bit / fp8 formats (bf16 y, docs/NUMERICS.md "Output"), 4 for the 4-bit formats (fp32 y). At
decode sizes the fused kernels keep y in registers, so the floor is computed from 64 tokens up.
(bench/results/2026-11-28-h100-y-l2-slices measured that y does not stay in L2 by column slices on an H100.)

    python3 bench/y_floor.py GRID/fusedmoe-bench.json[.gz] [--target PCT] [--min-m M]

For each point: % of roofline measured, y bytes, floor = max((roofline bytes + y bytes) / HBM read,
FLOPs / rate), cap = roofline time / floor (the most % of roofline any implementation that keeps the
round trip can show) and rate cap = FLOPs / rate / floor (the most % of the matmul rate it can show: issue 5's
DeepSeek-V3 TP1 and issue 6's 4096-token targets are in that unit). Points whose cap is below --target (default 80, issue 3's target from 64 tokens up)
are marked. Where the roofline is the bytes' (memory-bound points) the cap is the byte ratio roofline bytes /
(roofline bytes + y bytes), the same on any device; compute-bound points move with the device's bandwidth.
"""
import argparse, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import load_json  # noqa: E402  (a JSON file or its .gz copy)

FOUR_BIT = ('w4a8-int4', 'mxfp4', 'mxfp4-fp8', 'nvfp4', 'nvfp4-w4a4')


def y_bytes(p):
    return 2 * p['valid_slots'] * p['K'] * (4 if p['format'] in FOUR_BIT else 2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('grid')
    ap.add_argument('--target', type=float, default=80.0)
    ap.add_argument('--min-m', type=int, default=64)
    a = ap.parse_args()
    pts = [p for p in load_json(a.grid)['points'] if p.get('status') == 'OK' and p['M'] >= a.min_m]
    print('| preset | format | M | % of roofline | roofline us | y round trip MB | floor us | cap % | rate cap % |')
    print('|---|---|---:|---:|---:|---:|---:|---:|---:|')
    below = []
    for p in pts:
        bw, rate = p['read_tbps'] * 1e12, p['rate_tflops'] * 1e12
        yb = y_bytes(p)
        floor = max((p['bytes'] + yb) / bw, p['flops'] / rate)
        cap = 100.0 * p['roofline_ms'] * 1e-3 / floor
        rate_cap = 100.0 * p['flops'] / rate / floor
        mark = ' **' if cap < a.target else ''
        if cap < a.target:
            below.append(f"{p['preset']} {p['format']} M={p['M']} (cap {cap:.1f}%)")
        print(f"| {p['preset']} | {p['format']} | {p['M']} | {p['pct_roofline']:.1f} | {p['roofline_ms'] * 1e3:.0f} | "
              f"{yb / 1e6:.0f} | {floor * 1e6:.0f} | {cap:.1f}{mark} | {rate_cap:.1f} |")
    print()
    print(f"{len(below)} of {len(pts)} points cannot reach {a.target:g}% of roofline with the y round trip"
          + (': ' + '; '.join(below) if below else ''))


if __name__ == '__main__':
    main()
