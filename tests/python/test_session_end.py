"""bench/session_end.sh: the device-side end-of-session check, run here with stand-ins for the GPU test binary,
compute-sanitizer, nvidia-smi and fusedmoe-bench (no GPU).

Run: python3 -m pytest tests/python/test_session_end.py
"""
import gzip
import json
import os
import subprocess
import sys
import tarfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_report import bench_point, make_bench  # noqa: E402  (a fabricated bench JSON report.py accepts)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# gtest stand-in: 3 tests pass, 2 with FUSEDMOE_W4_LEAN=0 set (so the switch step shows the variable arrived), one
# fails when the filter names "Broken".
FAKE_TESTS = """#!/bin/sh
case "$*" in *Broken*) echo "[  FAILED  ] Broken.Case"; echo "[  FAILED  ] 1 test, listed below:"; exit 1;; esac
if [ "$FUSEDMOE_W4_LEAN" = 0 ]; then echo "[  PASSED  ] 2 tests."; else echo "[  PASSED  ] 3 tests."; fi
echo "[  SKIPPED ] 1 test, listed below:"
"""
# compute-sanitizer stand-in: runs the program after its options, then its summary line.
FAKE_SANITIZER = """#!/bin/sh
while [ "${1#--}" != "$1" ]; do shift 2; done
"$@"; rc=$?
echo "========= ERROR SUMMARY: 0 errors"
exit $rc
"""
FAKE_SMI = """#!/bin/sh
echo "name, driver_version"; echo "Fake GPU, 1.0"
"""
# fusedmoe-bench stand-in: --list works; a run copies the fabricated JSON into --out-dir.
FAKE_BENCH = """#!/bin/sh
for a in "$@"; do [ "$a" = --list ] && exit 0; done
while [ $# -gt 0 ]; do [ "$1" = --out-dir ] && { mkdir -p "$2"; cp "$GRID_JSON" "$2/fusedmoe-bench.json"; }; shift; done
echo "3 ok, 0 failed, 0 errors, 0 skipped; 1.0 s"
"""


def script(path, text):
    path.write_text(text)
    path.chmod(0o755)


def run_session_end(tmp_path, name, **env):
    src = tmp_path / "pack_src" / "bin"
    src.mkdir(parents=True)
    script(src / "tests", FAKE_TESTS)
    script(src / "bench", FAKE_BENCH)
    (src / "sha").write_text("abc1234\n")
    with tarfile.open(tmp_path / "bins.tgz", "w:gz") as t:
        t.add(src, arcname="bin")
    tools = tmp_path / "tools"
    tools.mkdir()
    script(tools / "compute-sanitizer", FAKE_SANITIZER)
    script(tools / "nvidia-smi", FAKE_SMI)
    grid = make_bench([bench_point(preset="p", fmt="mxfp4", M=m, median_ms=ms) for m, ms in ((1, 0.05), (8, 0.2))])
    (tmp_path / "grid.json").write_text(json.dumps(grid))
    out = tmp_path / "out"
    out.mkdir()
    e = dict(os.environ, OUT=str(out), SE_DIR=str(tmp_path / "unpacked"), SE_PACK=str(tmp_path / "bins.tgz"),
             PATH=f"{tools}:{os.environ['PATH']}", GRID_JSON=str(tmp_path / "grid.json"), TMPDIR=str(tmp_path))
    e.pop("FUSEDMOE_W4_LEAN", None)
    e.update(env)
    p = subprocess.run(["bash", "bench/session_end.sh", name], cwd=ROOT, env=e, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert sorted(os.listdir(out)) == [f"{name}.tgz"]  # one file comes back
    with tarfile.open(out / f"{name}.tgz") as t:
        t.extractall(tmp_path / "got")
    return p.stdout, tmp_path / "got" / name


def test_every_step(tmp_path):
    stdout, got = run_session_end(tmp_path, "end", SE_GRID_PHASES="bench report", SE_REPEAT="-")
    summary = (got / "suite" / "summary.txt").read_text()
    assert "suite: [  PASSED  ] 3 tests." in summary
    assert "memcheck: ========= ERROR SUMMARY: 0 errors" in summary
    assert "FUSEDMOE_W4_LEAN=0: [  PASSED  ] 2 tests." in summary  # the switch reached the test binary
    assert "grid rc=0" in summary and "grid: 3 ok" in summary
    for log in ("gpu_tests", "memcheck", "switch_1"):
        assert (got / "suite" / f"{log}.log.gz").exists()
    assert "abc1234" in (got / "grid" / "device.txt").read_text()
    with gzip.open(got / "grid" / "fusedmoe-bench.json.gz", "rt") as f:
        assert len(json.load(f)["points"]) == 2
    md = (got / "grid" / "summary.md").read_text()
    assert "| p | mxfp4 | 1 |" in md and "No peer timed" in md  # the 4-bit summary, without peers
    assert not any(p.name == "routing" or p.suffix == ".npy" for p in got.rglob("*"))
    assert stdout.splitlines()[-1].startswith("done ")


def test_chosen_steps_and_a_failing_switch(tmp_path):
    _, got = run_session_end(tmp_path, "few", SE_STEPS="switches",
                             SE_SWITCHES="FUSEDMOE_W4_LEAN=0@W4.* FUSEDMOE_X=1@Broken.*")
    summary = (got / "suite" / "summary.txt").read_text()
    assert "suite" not in summary.replace("suite/", "") and "memcheck" not in summary and "grid" not in summary
    assert "switch 1 (FUSEDMOE_W4_LEAN=0) rc=0" in summary
    assert "switch 2 (FUSEDMOE_X=1) rc=1" in summary  # a failure is reported, not hidden
    assert "FUSEDMOE_X=1: [  FAILED  ] Broken.Case" in summary
    assert not (got / "grid" / "summary.md").exists()
