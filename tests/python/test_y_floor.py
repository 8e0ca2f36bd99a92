"""bench/y_floor.py on fabricated grid points (no GPU): the floor with GEMM2's y written and read back, the cap
on % of roofline, the bf16 / fp32 y bytes by format and the points below the target.

Run: python3 -m pytest tests/python/test_y_floor.py
"""
import gzip
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "y_floor.py")


def point(fmt, M, slots, K, weight_bytes, flops, pct):
    bw, rate = 2.0, 1000.0  # TB/s, TFLOP/s
    roof_ms = max(weight_bytes / (bw * 1e12), flops / (rate * 1e12)) * 1e3
    return {"preset": "p", "format": fmt, "M": M, "status": "OK", "valid_slots": slots, "K": K,
            "bytes": weight_bytes, "flops": flops, "read_tbps": bw, "rate_tflops": rate, "roofline_ms": roof_ms,
            "pct_roofline": pct}


def run(path, *args):
    out = subprocess.run([sys.executable, SCRIPT, str(path)] + list(args), check=True, capture_output=True, text=True)
    return out.stdout


def test_caps(tmp_path):
    pts = [
        # memory-bound: 1 GB of weights (500 us); bf16 y: 2 x 1000 x 1000 x 2 = 4 MB -> floor 502 us, cap 99.6%
        point("fp8-tensor", 1024, 1000, 1000, 1e9, 1e9, 70.0),
        # y as big as the weights: bf16 y 2 x 250000 x 1000 x 2 = 1 GB -> floor 1000 us, cap 50%
        point("bf16", 4096, 250000, 1000, 1e9, 1e9, 40.0),
        # 4-bit: fp32 y, 2 x 125000 x 1000 x 4 = 1 GB -> cap 50% too
        point("mxfp4", 4096, 125000, 1000, 1e9, 1e9, 40.0),
        # compute-bound (2 ms of FLOPs): the y bytes fit under it, cap 100%
        point("bf16", 2048, 250000, 1000, 1e9, 2e12, 60.0),
        # below --min-m: left out
        point("bf16", 8, 1000000, 1000, 1e9, 1e9, 60.0),
    ]
    f = tmp_path / "grid.json.gz"
    with gzip.open(f, "wt") as g:
        json.dump({"points": pts}, g)
    out = run(f)
    rows = [l for l in out.splitlines() if l.startswith("| p |")]
    assert len(rows) == 4
    # rate cap: 1 GFLOP at 1000 TFLOP/s is 1 us of the 502 / 1000 us floors; 2 ms of FLOPs fill theirs
    assert "| fp8-tensor | 1024 | 70.0 | 500 | 4 | 502 | 99.6 | 0.2 |" in rows[0]
    assert "| bf16 | 4096 | 40.0 | 500 | 1000 | 1000 | 50.0 ** | 0.1 |" in rows[1]
    assert "| mxfp4 | 4096 | 40.0 | 500 | 1000 | 1000 | 50.0 ** | 0.1 |" in rows[2]
    assert "| bf16 | 2048 | 60.0 | 2000 | 1000 | 2000 | 100.0 | 100.0 |" in rows[3]
    assert "2 of 4 points cannot reach 80% of roofline" in out
    # a lower target and a higher --min-m
    out = run(f, "--target", "40", "--min-m", "2048")
    assert "0 of 3 points cannot reach 40% of roofline" in out
