"""bench/ab.py: the comparison arithmetic and the interleaved runner, on fabricated runs (no GPU).

Run: python3 -m pytest tests/python/test_ab.py
"""
import importlib.util
import json
import math
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("ab", os.path.join(ROOT, "bench", "ab.py"))
ab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ab)


def write_run(d, times_us, status=None, commit="abc1234"):
    """A fusedmoe-bench.json in d with one point per (preset, M) -> time in µs."""
    os.makedirs(d, exist_ok=True)
    pts = []
    for (preset, M), us in times_us.items():
        st = (status or {}).get((preset, M), "OK")
        pts.append({"preset": preset, "format": "bf16", "routing": "uniform", "M": M, "status": st,
                    "median_ms": None if st != "OK" else us / 1000.0})
    with open(os.path.join(d, "fusedmoe-bench.json"), "w") as f:
        json.dump({"commit": commit, "device": {"name": "NVIDIA H100 80GB HBM3"}, "points": pts}, f)
    return d


def rows(table):
    return [l for l in table.splitlines() if l.startswith("| ") and not l.startswith("| preset")]


def test_ratio_is_mean_over_mean_and_geomean(tmp_path):
    t = tmp_path
    dirs = [write_run(t / "1_old", {("q", 1): 100.0, ("q", 8): 200.0}),
            write_run(t / "2_new", {("q", 1): 90.0, ("q", 8): 210.0}),
            write_run(t / "3_old", {("q", 1): 110.0, ("q", 8): 200.0}),
            write_run(t / "4_new", {("q", 1): 90.0, ("q", 8): 210.0})]
    out = ab.compare([str(d) for d in dirs], ["old", "new", "old", "new"], "old")
    r = rows(out)
    assert r[0] == "| q | bf16 | uniform | 1 | 100.0 | 90.0 | 110.0 | 90.0 | 0.857 |"
    assert r[1] == "| q | bf16 | uniform | 8 | 200.0 | 210.0 | 200.0 | 210.0 | 1.050 |"
    want = math.exp((math.log(90 / 105) + math.log(1.05)) / 2)
    assert f"Geometric mean of new / old over 2 points: {want:.3f}." in out
    assert "commit abc1234" in out and "NVIDIA H100" in out


def test_point_not_ok_in_one_run_is_listed_and_left_out(tmp_path):
    t = tmp_path
    dirs = [write_run(t / "1_a", {("q", 1): 100.0, ("q", 8): 200.0}),
            write_run(t / "2_b", {("q", 1): 50.0, ("q", 8): 0.0}, status={("q", 8): "FAIL"})]
    out = ab.compare([str(d) for d in dirs], [ab.label_of(str(d)) for d in dirs], "a")
    r = rows(out)
    assert r[1] == "| q | bf16 | uniform | 8 | 200.0 | FAIL |  |"
    assert "b / a over 1 points: 0.500." in out
    assert "1 point(s) not OK in some run" in out


def test_labels_and_variant_specs():
    assert ab.label_of("/x/out/12_no_pdl/") == "no_pdl"
    assert ab.label_of("baseline") == "baseline"
    assert ab.parse_variant("old:FMOE_X=1,Y=2") == ("old", {"FMOE_X": "1", "Y": "2"})
    assert ab.parse_variant("new:") == ("new", {})
    with pytest.raises(ValueError):
        ab.parse_variant(":X=1")
    with pytest.raises(ValueError):
        ab.parse_variant("old:X")
    with pytest.raises(ValueError):
        ab.compare([], [], "old")


def test_run_interleaves_and_isolates_the_switches(tmp_path, monkeypatch):
    # A stand-in for fusedmoe-bench: the point's time is 50 µs with FMOE_FAST set, else 100 µs,
    # and 1 µs more when a stale FMOE_SLOW leaked in.
    fake = tmp_path / "fake_bench.py"
    fake.write_text(
        "import json, os, sys\n"
        "d = sys.argv[sys.argv.index('--out-dir') + 1]\n"
        "us = (50.0 if os.environ.get('FMOE_FAST') else 100.0) + (1.0 if os.environ.get('FMOE_SLOW') else 0.0)\n"
        "p = {'preset': 'q', 'format': 'bf16', 'routing': 'uniform', 'M': int(sys.argv[2]), 'status': 'OK',\n"
        "     'median_ms': us / 1000}\n"
        "json.dump({'commit': 'c', 'device': {'name': 'g'}, 'points': [p]}, open(os.path.join(d, 'fusedmoe-bench.json'), 'w'))\n")
    wrapper = tmp_path / "bench.sh"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {fake} \"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setenv("FMOE_SLOW", "1")  # set outside: a variant's switch, so unset in the others
    ns = type("A", (), {})()
    ns.bench, ns.out, ns.order, ns.base = str(wrapper), str(tmp_path / "runs"), "old,new,old", None
    ns.variant = ["old:FMOE_SLOW=1", "new:FMOE_FAST=1"]
    out = ab.run(ns, ["--m", "4"])
    assert sorted(os.listdir(tmp_path / "runs")) == ["1_old", "2_new", "3_old"]
    assert rows(out) == ["| q | bf16 | uniform | 4 | 101.0 | 50.0 | 101.0 | 0.495 |"]


def test_variant_bench_runs_each_variants_own_binary(tmp_path):
    # Two stand-ins: the "main" build reports 100 µs, the "branch" build 80 µs.
    def stand_in(name, us):
        fake = tmp_path / f"{name}.py"
        fake.write_text(
            "import json, os, sys\n"
            "d = sys.argv[sys.argv.index('--out-dir') + 1]\n"
            f"p = {{'preset': 'q', 'format': 'bf16', 'routing': 'uniform', 'M': 1, 'status': 'OK', 'median_ms': {us} / 1000}}\n"
            "json.dump({'commit': 'c', 'device': {'name': 'g'}, 'points': [p]}, open(os.path.join(d, 'fusedmoe-bench.json'), 'w'))\n")
        w = tmp_path / f"{name}.sh"
        w.write_text(f"#!/bin/sh\nexec {sys.executable} {fake} \"$@\"\n")
        w.chmod(0o755)
        return str(w)
    ns = type("A", (), {})()
    ns.bench, ns.out, ns.order, ns.base = None, str(tmp_path / "runs"), "main,branch,main,branch", None
    ns.variant = ["main", "branch"]
    ns.variant_bench = [f"main={stand_in('main', 100.0)}", f"branch={stand_in('branch', 80.0)}"]
    out = ab.run(ns, [])
    assert rows(out) == ["| q | bf16 | uniform | 1 | 100.0 | 80.0 | 100.0 | 80.0 | 0.800 |"]
    ns.variant_bench = [f"main={stand_in('main', 100.0)}"]  # no binary for "branch", no --bench
    with pytest.raises(ValueError, match="no binary"):
        ab.run(ns, [])
    ns.variant_bench = ["other=/bin/true"]
    with pytest.raises(ValueError, match="NAME=PATH"):
        ab.run(ns, [])


def test_reads_a_gzipped_run(tmp_path):
    # bench/results stores JSON files over 100 KB gzipped: compare reads fusedmoe-bench.json.gz too.
    import gzip
    a = write_run(tmp_path / "1_old", {("q", 1): 100.0})
    b = write_run(tmp_path / "2_new", {("q", 1): 80.0})
    src = os.path.join(b, "fusedmoe-bench.json")
    with open(src, "rb") as f, gzip.open(src + ".gz", "wb") as g:
        g.write(f.read())
    os.remove(src)
    table = ab.compare([str(a), str(b)], ["old", "new"], "old")
    assert "0.800" in table


def test_stages_lists_each_runs_breakdown(tmp_path):
    d = write_run(tmp_path / "1_old", {("q", 8): 100.0})
    path = os.path.join(d, "fusedmoe-bench.json")
    with open(path) as f:
        doc = json.load(f)
    doc["points"][0]["stages"] = {"permute_ms": 0.0105, "gemm1_ms": 0.06, "activation_ms": None,
                                  "gemm2_ms": 0.03, "finalize_ms": 0.0062}
    with open(path, "w") as f:
        json.dump(doc, f)
    write_run(tmp_path / "2_new", {("q", 8): 90.0})  # no stages recorded: zeros
    out = ab.stages([str(d), str(tmp_path / "2_new")]).splitlines()
    assert out[0] == ("1_old q bf16 uniform M=8 OK med=100.0 permute=10.5 gemm1=60.0 activation=0.0 "
                      "gemm2=30.0 finalize=6.2")
    assert out[1] == ("2_new q bf16 uniform M=8 OK med=90.0 permute=0.0 gemm1=0.0 activation=0.0 "
                      "gemm2=0.0 finalize=0.0")
