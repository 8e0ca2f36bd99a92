"""bench/report.py (and bench/peers.py's pure helpers) on fabricated results: no GPU needed.

Run: python3 -m pytest tests/python/test_report.py
"""
import importlib.util
import json
import math
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "bench", name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


report = _load("report")


def bench_point(preset="mixtral-8x7b", fmt="bf16", M=64, routing="uniform", median_ms=1.0, status="OK", **kw):
    p = {
        "preset": preset, "E": 8, "E_local": 8, "topk": 2, "K": 4096, "N": 14336, "ep": 1, "activation": "silu",
        "format": fmt, "hidden_dtype": "BF16", "M": M, "routing": routing,
        "routing_file": f"routing/{preset}_{routing}_M{M}_ids.npy",
        "routing_weights_file": f"routing/{preset}_{routing}_M{M}_weights.npy",
        "status": status, "note": kw.pop("note", ""), "valid_slots": 2 * M, "experts_hit": 8,
        "max_tokens_per_expert": M, "flops": 1e12, "weight_bytes": 2e9, "act_bytes": 1e6, "bytes": 2.001e9,
        "timing_method": "graph" if M <= 256 else "events", "reps": 50 if median_ms else 0,
        "median_ms": median_ms, "p10_ms": median_ms * 0.98 if median_ms else None,
        "p90_ms": median_ms * 1.05 if median_ms else None, "min_ms": median_ms * 0.97 if median_ms else None,
        "max_ms": None, "mean_ms": None, "tflops": 1.0 / median_ms if median_ms else None,
        "tbps": 2.001 / median_ms if median_ms else None, "rate_class": "bf16", "rate_tflops": 800.0,
        "read_tbps": 3.0, "roofline_ms": 0.667, "pct_roofline": 66.7 / median_ms if median_ms else None,
        "bound": "memory",
        "check": {"checked": True, "tokens": 8, "rel_err": 3.1e-3, "tol": 2e-2, "ms": 12.0, "nonfinite": 0},
        "stages": {"runs": 3, "permute_ms": 0.01, "gemm1_ms": 0.6, "activation_ms": 0.0, "gemm2_ms": 0.35,
                   "finalize_ms": 0.02, "total_ms": 0.98},
    }
    p.update(kw)
    return p


def make_bench(points, **kw):
    b = {
        "schema": "fusedmoe-bench/1", "tool": "fusedmoe-bench", "tool_version": "1", "commit": "abc1234",
        "command": "fusedmoe-bench --preset mixtral-8x7b", "date_utc": "2026-11-21T10:00:00Z", "dry_run": False,
        "wall_s": 123.0,
        "device": {"index": 0, "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "sm_count": 132,
                   "l2_bytes": 52428800, "mem_bytes": 85e9, "peak_sm_clock_mhz": 1980, "peak_mem_clock_mhz": 2619,
                   "driver_version": "580.159.04", "cuda_driver_version": 13000, "cuda_runtime_version": 13000,
                   "max_sm_clock_mhz": 1980, "power_limit_w": 700.0,
                   "clocks": [{"when": "start", "sm_mhz": 345, "mem_mhz": 2619, "temperature_c": 30, "power_w": 70}]},
        "ceilings": {"measured": True, "hbm_read_tbps": 3.05, "hbm_read_config": "4 blocks/SM", "copy_tbps": 2.9,
                     "bf16_tflops": 790.0, "fp8_tflops": 1300.0, "fp8_fast_accum_tflops": 1450.0,
                     "fp32_simt_tflops": 51.0, "tf32_tflops": 370.0, "fp32_rate_used": "fp32-simt",
                     "fp8_rate_used": "max", "errors": ""},
        "method": {"warmup": 3, "min_reps": 10, "max_reps": 200, "target_ms": 100, "rotate": 4,
                   "graph_max_m": 256, "flush_bytes": 268435456, "stage_runs": 3, "check_tokens": 8,
                   "fp8_act_scale": "auto", "description": "per rep: flush, event, run, event"},
        "shapes": ["name=mixtral-8x7b,E=8,topk=2,K=4096,N=14336,act=silu,bias=0,router_on_input=0,ep=1"],
        "points": points,
    }
    b.update(kw)
    return b


def peer_rec(peer, fmt, M=64, routing="uniform", median_ms=2.0, status="OK", preset="mixtral-8x7b", note=""):
    return {"preset": preset, "M": M, "routing": routing, "peer": peer, "format": fmt, "status": status,
            "note": note, "median_ms": median_ms if status == "OK" else None, "p10_ms": None, "p90_ms": None,
            "reps": 20, "flops": 1e12, "check": {"rel_err": 1e-3, "tol": 2e-2, "tokens": 8}}


def make_peers(points):
    return {"schema": "fusedmoe-peers/1", "torch_version": "2.11.0", "cuda_version": "13.0",
            "device": {"name": "NVIDIA H100 80GB HBM3"}, "command": "peers.py --bench-json x",
            "available": {"_grouped_mm": True, "_scaled_grouped_mm": True, "_scaled_mm": True}, "points": points}


@pytest.fixture
def sample():
    bench = make_bench([
        bench_point(fmt="bf16", M=64, median_ms=1.0),
        bench_point(fmt="bf16", M=4096, median_ms=8.0),
        bench_point(fmt="fp8-tensor", M=64, median_ms=0.5),
        bench_point(fmt="fp8-channel", M=64, median_ms=0.8),
        bench_point(fmt="mxfp4", M=64, median_ms=0.4),
        bench_point(fmt="fp16", M=64, median_ms=None, status="SKIP", note="can_implement: no fp16 kernels"),
        bench_point(fmt="fp32", M=64, median_ms=5.0, status="FAIL", note="relative error 1e-3 > tolerance 1e-4"),
    ])
    peers = make_peers([
        peer_rec("torch-loop", "bf16", M=64, median_ms=2.5),
        peer_rec("torch-grouped-mm", "bf16", M=64, median_ms=1.5),
        peer_rec("torch-loop", "bf16", M=4096, median_ms=6.0),
        peer_rec("torch-grouped-mm", "bf16", M=4096, status="ERROR", note="RuntimeError: boom"),
        peer_rec("torch-loop-fp8", "fp8-tensor", M=64, median_ms=1.0),
        peer_rec("torch-scaled-grouped-mm", "fp8-rowwise", M=64, median_ms=0.4),
        # another routing: must not be merged into the uniform rows
        peer_rec("torch-loop", "bf16", M=64, routing="zipf", median_ms=100.0),
    ])
    return bench, peers


def rows_by_key(rows):
    return {(r["point"]["format"], r["point"]["M"]): r for r in rows}


def test_speed_ratio_arithmetic():
    assert report.speed_ratio(2.0, 1.0) == pytest.approx(2.0)
    assert report.speed_ratio(1.0, 4.0) == pytest.approx(0.25)
    assert report.speed_ratio(None, 1.0) is None
    assert report.speed_ratio(1.0, None) is None
    assert report.speed_ratio(1.0, 0.0) is None
    assert report.speed_ratio(float("nan"), 1.0) is None


def test_merge_matches_formats_and_computes_ratios(sample):
    bench, peers = sample
    rows = report.merge(bench, peers)
    assert len(rows) == len(bench["points"])
    by = rows_by_key(rows)

    bf = by[("bf16", 64)]["peers"]
    assert list(bf) == ["torch-loop", "torch-grouped-mm"]  # only bf16 peers, in the fixed order
    assert bf["torch-loop"]["ratio"] == pytest.approx(2.5)  # 2.5 ms peer / 1.0 ms fusedmoe
    assert bf["torch-grouped-mm"]["ratio"] == pytest.approx(1.5)
    assert bf["torch-loop"]["median_ms"] == pytest.approx(2.5)  # the zipf record did not leak in

    big = by[("bf16", 4096)]["peers"]
    assert big["torch-loop"]["ratio"] == pytest.approx(0.75)  # 6 / 8: the peer is faster here
    assert big["torch-grouped-mm"]["ratio"] is None
    assert big["torch-grouped-mm"]["status"] == "ERROR"

    f8 = by[("fp8-tensor", 64)]["peers"]
    assert set(f8) == {"torch-loop-fp8", "torch-scaled-grouped-mm"}
    assert f8["torch-loop-fp8"]["ratio"] == pytest.approx(2.0)
    assert f8["torch-scaled-grouped-mm"]["ratio"] == pytest.approx(0.8)

    ch = by[("fp8-channel", 64)]["peers"]
    assert ch["torch-scaled-grouped-mm"]["ratio"] == pytest.approx(0.5)
    assert ch["torch-loop-fp8"]["ratio"] == pytest.approx(1.25)

    w4 = by[("mxfp4", 64)]["peers"]  # 4-bit: against the bf16 peers on dequantised weights
    assert list(w4) == ["torch-loop", "torch-grouped-mm"]
    assert w4["torch-loop"]["ratio"] == pytest.approx(2.5 / 0.4)
    assert w4["torch-grouped-mm"]["ratio"] == pytest.approx(1.5 / 0.4)
    assert by[("fp16", 64)]["peers"] == {}
    assert by[("fp32", 64)]["peers"] == {}


def test_merge_without_peers(sample):
    bench, _ = sample
    rows = report.merge(bench, None)
    assert all(r["peers"] == {} for r in rows)
    md = report.render(bench, None)
    assert "fusedmoe/peer" in md
    assert "torch-loop µs" not in md


def test_fusedmoe_without_time_gives_no_ratio(sample):
    bench, peers = sample
    bench["points"][0]["median_ms"] = None
    bench["points"][0]["status"] = "ERROR"
    r = report.merge(bench, peers)[0]
    assert r["peers"]["torch-loop"]["median_ms"] == pytest.approx(2.5)
    assert r["peers"]["torch-loop"]["ratio"] is None


def test_repeat_diffs():
    a = make_bench([bench_point(fmt="bf16", M=1, median_ms=0.010), bench_point(fmt="bf16", M=64, median_ms=1.0),
                    bench_point(fmt="fp16", M=64, median_ms=None, status="SKIP")])
    b = make_bench([bench_point(fmt="bf16", M=1, median_ms=0.011), bench_point(fmt="bf16", M=64, median_ms=0.95),
                    bench_point(fmt="fp16", M=64, median_ms=1.0), bench_point(fmt="bf16", M=8, median_ms=1.0)])
    d = report.repeat_diffs(a, b)
    assert [(x["format"], x["M"]) for x in d] == [("bf16", 1), ("bf16", 64)]
    assert d[0]["diff_pct"] == pytest.approx(10.0)
    assert d[1]["diff_pct"] == pytest.approx(-5.0)
    assert d[0]["spread1_pct"] == pytest.approx(7.0)  # (1.05 - 0.98) / 1
    table = report.repeat_table(d)
    assert "+10.0%" in table and "-5.0%" in table
    assert "Median |difference| 7.5%" in table and "largest 10.0%" in table
    assert report.repeat_diffs(a, None) == []


def test_render_contents(sample):
    bench, peers = sample
    repeat = make_bench([bench_point(fmt="bf16", M=64, median_ms=1.02)])
    repeat["ceilings"]["hbm_read_tbps"] = 3.01
    md = report.render(bench, peers, repeat, command="bash bench/run_gpu_bench.sh")
    assert md.startswith("# fusedmoe benchmark: NVIDIA H100 80GB HBM3, 2026-11-21")
    assert "`abc1234`" in md
    assert "`bash bench/run_gpu_bench.sh`" in md
    # ceilings, and the repeat run's value beside them
    assert "| HBM read bandwidth | 3.05 | 3.01 | TB/s |" in md
    assert "| BF16 matmul (cuBLASLt) | 790 |" in md
    # a result row with its peers: times in µs and the ratios
    row = next(line for line in md.splitlines() if line.startswith("| bf16 | uniform | 64 |"))
    assert "| 1000.0 |" in row  # 1 ms median
    assert "2500.0 (2.50×)" in row and "1500.0 (1.50×)" in row
    row = next(line for line in md.splitlines() if line.startswith("| bf16 | uniform | 4096 |"))
    assert "6000.0 (0.75×)" in row and "ERROR" in row
    assert "+2.0%" in md  # repeat difference 1.0 -> 1.02 ms
    # stage table
    assert "| mixtral-8x7b | bf16 | uniform | 64 | 10.0 | 600.0 | 0.0 | 350.0 | 20.0 | 980.0 |" in md
    # skipped / failed points and the peer error are listed
    assert "SKIP mixtral-8x7b fp16: can_implement: no fp16 kernels" in md
    assert "FAIL mixtral-8x7b fp32: relative error 1e-3 > tolerance 1e-4" in md
    assert "ERROR mixtral-8x7b peer torch-grouped-mm: RuntimeError: boom" in md


def test_table_columns_are_consistent(sample):
    bench, peers = sample
    md = report.results_tables(report.merge(bench, peers), peers)
    lines = [line for line in md.splitlines() if line.startswith("|")]
    widths = {line.count("|") - line.count("\\|") for line in lines}
    assert len(widths) == 1, widths


def test_device_slug():
    assert report.device_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert report.device_slug("NVIDIA H200") == "nvidia-h200"
    assert report.device_slug("") == "unknown"


def test_main_writes_report(tmp_path, sample):
    bench, peers = sample
    bp, pp = tmp_path / "fusedmoe-bench.json", tmp_path / "peers.json"
    bp.write_text(json.dumps(bench))
    pp.write_text(json.dumps(peers))
    out = tmp_path / "results"
    assert report.main(["--bench", str(bp), "--peers", str(pp), "--results-dir", str(out), "--no-plots",
                        "--command", "run it"]) == 0
    md = out / "2026-11-21-nvidia-h100-80gb-hbm3.md"
    assert md.exists()
    assert "Plots not made" in md.read_text()


def test_plots(tmp_path, sample):
    pytest.importorskip("matplotlib")
    bench, peers = sample
    bp, pp = tmp_path / "b.json", tmp_path / "p.json"
    bp.write_text(json.dumps(bench))
    pp.write_text(json.dumps(peers))
    out = tmp_path / "r"
    assert report.main(["--bench", str(bp), "--peers", str(pp), "--results-dir", str(out)]) == 0
    stem = "2026-11-21-nvidia-h100-80gb-hbm3"
    assert (out / f"{stem}-mixtral-8x7b-roofline.png").stat().st_size > 1000
    assert (out / f"{stem}-mixtral-8x7b-time.png").stat().st_size > 1000
    text = (out / f"{stem}.md").read_text()
    assert f"]({stem}-mixtral-8x7b-roofline.png)" in text


# ---------------------------------------------------------------- peers.py helpers
np = pytest.importorskip("numpy")
peers_mod = _load("peers")


def test_peer_case_selection(sample):
    bench, _ = sample
    cases = peers_mod.select_cases(bench)
    by = {(c["M"], c["routing"]): c for c in cases}
    assert by[(64, "uniform")]["peers"] == ["torch-loop", "torch-grouped-mm", "torch-loop-fp8",
                                            "torch-scaled-grouped-mm"]
    assert by[(4096, "uniform")]["peers"] == ["torch-loop", "torch-grouped-mm"]
    only_fp8 = peers_mod.select_cases(bench, peers=("torch-loop-fp8",), ms={64})
    assert len(only_fp8) == 1 and only_fp8[0]["peers"] == ["torch-loop-fp8"]


def test_peer_shape_and_slots():
    s = peers_mod.parse_shape_spec("name=x,E=16,topk=4,K=128,N=64,act=swigluoai,bias=1,router_on_input=0,ep=2")
    assert (s["name"], s["E"], s["topk"], s["K"], s["N"], s["act"], s["bias"], s["ep"]) == \
        ("x", 16, 4, 128, 64, "swigluoai", True, 2)
    assert not s.get("interleaved")
    assert peers_mod.parse_shape_spec("name=y,E=4,topk=1,K=8,N=8,act=swigluoai,interleaved=1")["interleaved"] is True
    ids = np.array([[0, 9, 3, 15], [3, 1, 8, 0]], dtype=np.int32)
    loc = peers_mod.local_ids(ids, E=16, ep=2)  # rank 0 holds experts 0..7
    assert loc.tolist() == [[0, -1, 3, -1], [3, 1, -1, 0]]
    w = np.arange(8, dtype=np.float32).reshape(2, 4)
    tok, wt, exp, segs, valid = peers_mod.slot_lists(loc, w)
    assert exp.tolist() == [0, 0, 1, 3, 3]
    assert tok.tolist() == [0, 1, 1, 0, 1]
    assert wt.tolist() == [0.0, 7.0, 5.0, 2.0, 4.0]
    assert segs == [(0, 0, 2), (1, 2, 3), (3, 3, 5)]
    assert sorted(valid.tolist()) == [0, 2, 4, 5, 7]
    # FLOPs: 2 * valid slots * (R*K + K*N), R = 2N gated
    assert peers_mod.flops_of(s, 5) == 2.0 * 5 * (128 * 128 + 128 * 64)
    assert peers_mod.flops_of(dict(s, act="relu2"), 5) == 2.0 * 5 * (64 * 128 + 128 * 64)


def test_peer_summary_stats():
    st = peers_mod.summarize([3.0, 1.0, 2.0, 4.0, 5.0])
    assert st["median_ms"] == 3.0 and st["min_ms"] == 1.0 and st["reps"] == 5
    assert st["p10_ms"] == pytest.approx(1.4) and st["p90_ms"] == pytest.approx(4.6)
    assert peers_mod.summarize([])["median_ms"] is None
    assert not math.isnan(st["p90_ms"])
