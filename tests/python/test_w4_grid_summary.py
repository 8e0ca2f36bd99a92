"""bench/w4_grid_summary.py on a fabricated 4-bit grid (no GPU): gzipped and plain JSON inputs, the best peer
of the matching weight formats, the ratio to an older grid and the issue-6 targets table.

Run: python3 -m pytest tests/python/test_w4_grid_summary.py
"""
import gzip
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "w4_grid_summary.py")


def point(M, ms, pct, tflops, fmt="mxfp4"):
    return {"preset": "p", "format": fmt, "M": M, "status": "OK", "median_ms": ms, "pct_roofline": pct,
            "bound": "memory", "tflops": tflops, "rate_class": "bf16"}


def grid(times):
    return {"ceilings": {"bf16_tflops": 800.0, "fp8_tflops": 1400.0, "fp8_fast_accum_tflops": 1500.0},
            "points": [point(M, ms, pct, tf) for M, (ms, pct, tf) in times.items()]}


def run(args):
    out = subprocess.run([sys.executable, SCRIPT] + [str(a) for a in args], check=True, capture_output=True, text=True)
    return out.stdout


def test_tables_from_gzipped_and_plain_json(tmp_path):
    cur = grid({1: (0.050, 40.0, 1.0), 8: (0.200, 70.0, 2.0), 64: (0.700, 76.0, 8.0), 4096: (2.0, 45.0, 400.0)})
    old = grid({1: (0.100, 20.0, 0.5), 8: (0.200, 70.0, 2.0), 64: (0.700, 76.0, 8.0), 4096: (2.0, 45.0, 400.0)})
    peers = {"points": [
        # bf16 peers count for mxfp4; an fp8 peer does not (it needs fp8 activations).
        {"preset": "p", "format": "bf16", "M": 1, "status": "OK", "median_ms": 0.150, "peer": "torch-loop"},
        {"preset": "p", "format": "bf16", "M": 1, "status": "OK", "median_ms": 0.100, "peer": "torch-grouped-mm"},
        {"preset": "p", "format": "fp8-rowwise", "M": 1, "status": "OK", "median_ms": 0.010, "peer": "torch-scaled"},
        {"preset": "p", "format": "bf16", "M": 8, "status": "OK", "median_ms": 0.400, "peer": "torch-grouped-mm"},
    ]}
    with gzip.open(tmp_path / "cur.json.gz", "wt") as f:
        json.dump(cur, f)
    (tmp_path / "peers.json").write_text(json.dumps(peers))
    (tmp_path / "old.json").write_text(json.dumps(old))
    # The .gz copy is read under the plain name too (report.load_json).
    text = run([tmp_path / "cur.json", tmp_path / "peers.json", tmp_path / "old.json"])
    lines = text.splitlines()
    m1 = next(l for l in lines if l.startswith("| p | mxfp4 | 1 |"))
    assert "2.00x (torch-grouped-mm)" in m1  # 0.100 / 0.050: the fastest bf16 peer, not the fp8 one
    assert m1.rstrip().endswith("| 0.500 |")  # 0.050 / 0.100 against the old grid
    assert "Faster than the best peer at 2/2 points" in text
    # Targets: M = 1, the 8..64 range, M = 4096 as % of the BF16 rate (400 / 800).
    assert any(l.startswith("| p | mxfp4 | 40.0 | 70.0-76.0 | 50.0 |") for l in lines), text


def test_without_an_older_grid_or_peers(tmp_path):
    cur = grid({1: (0.050, 40.0, 1.0), 8: (0.200, 70.0, 2.0)})
    (tmp_path / "cur.json").write_text(json.dumps(cur))
    (tmp_path / "peers.json").write_text(json.dumps({"points": []}))
    text = run([tmp_path / "cur.json", tmp_path / "peers.json"])
    m8 = next(l for l in text.splitlines() if l.startswith("| p | mxfp4 | 8 |"))
    assert m8.rstrip().endswith("| - |")  # the ratio to an older grid: none given
    assert "No peer timed at any of these points." in text
