"""bench/ab_device.sh: the device-side A/B driver, run here with stand-in bench binaries (no GPU).

Run: python3 -m pytest tests/python/test_ab_device.py
"""
import os
import subprocess
import sys
import tarfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A stand-in for fusedmoe-bench: one point per M of --m, US µs (50 with FMOE_FAST set).
FAKE = """import json, os, sys
a = sys.argv
d = a[a.index('--out-dir') + 1]
us = 50.0 if os.environ.get('FMOE_FAST') else US
pts = [{'preset': a[a.index('--preset') + 1], 'format': a[a.index('--formats') + 1], 'routing': 'uniform',
        'M': int(m), 'status': 'OK', 'median_ms': us / 1000,
        'stages': {'runs': 1, 'gemm1_ms': us / 2000, 'total_ms': us / 1000}} for m in a[a.index('--m') + 1].split(',')]
json.dump({'commit': 'c', 'device': {'name': 'g'}, 'points': pts}, open(os.path.join(d, 'fusedmoe-bench.json'), 'w'))
"""


def make_pack(tmp_path):
    binary = tmp_path / "pack_src" / "bin"
    binary.mkdir(parents=True)
    for name, us in (("bench", 100.0), ("bench2", 80.0)):
        fake = tmp_path / f"{name}.py"
        fake.write_text(FAKE.replace("US", repr(us)))
        w = binary / name
        w.write_text(f"#!/bin/sh\nexec {sys.executable} {fake} \"$@\"\n")
        w.chmod(0o755)
    (binary / "sha").write_text("abc1234\n")
    pack = tmp_path / "bins.tgz"
    with tarfile.open(pack, "w:gz") as t:
        t.add(binary, arcname="bin")
    return pack


def run_ab(tmp_path, name, switch, points, **env):
    e = dict(os.environ, OUT=str(tmp_path / "out"), AB_DIR=str(tmp_path / "unpacked"), AB_PACK=str(make_pack(tmp_path)))
    e.pop("FMOE_FAST", None)
    e.update(env)
    (tmp_path / "out").mkdir(exist_ok=True)
    p = subprocess.run(["bash", "bench/ab_device.sh", name, switch] + points, cwd=ROOT, env=e,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    out = tmp_path / "out"
    assert sorted(os.listdir(out)) == [f"{name}.tgz"]  # one file comes back
    with tarfile.open(out / f"{name}.tgz") as t:
        t.extractall(tmp_path / "got")
    return p.stdout, tmp_path / "got" / name


def rows(md):
    return [l for l in md.read_text().splitlines() if l.startswith("| ") and not l.startswith("| preset")]


def test_one_switch_two_variants(tmp_path):
    stdout, got = run_ab(tmp_path, "sw", "FMOE_FAST=1", ["q 1,8 bf16"])
    r = rows(got / "ab_1.md")
    # off (FMOE_FAST set) 50 µs, on 100: ten runs off,on,on,off,off,on,on,off,off,on.
    assert r[0] == "| q | bf16 | uniform | 1 | 50.0 | 100.0 | 100.0 | 50.0 | 50.0 | 100.0 | 100.0 | 50.0 | 50.0 | 100.0 | 2.000 |"
    assert len(r) == 2 and "ab 1 (q 1,8 bf16) rc=0" in stdout
    assert "abc1234" in (got / "device.txt").read_text()
    assert (got / "stages_1.txt").read_text().count("gemm1=") == 20
    assert (got / "runs.tgz").exists()


def test_more_variants_and_a_second_binary(tmp_path):
    _, got = run_ab(tmp_path, "three", "-", ["q 4 bf16", "r 2 fp8"], AB_VARIANTS="a: b:FMOE_FAST=1 c:",
                    AB_VARIANT_BENCH="c=bench2", AB_BENCH_ARGS="--no-ceilings")
    for i, preset in ((1, "q"), (2, "r")):
        r = rows(got / f"ab_{i}.md")
        # Order a,b,c forward, backward, forward: a 100, b 50, c (bench2) 80.
        assert len(r) == 1 and r[0].startswith(f"| {preset} | ")
        assert r[0].endswith("| 100.0 | 50.0 | 80.0 | 80.0 | 50.0 | 100.0 | 100.0 | 50.0 | 80.0 | 0.500 | 0.800 |")
