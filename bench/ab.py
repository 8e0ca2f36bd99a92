#!/usr/bin/env python3
"""Same-binary A/B runs of fusedmoe-bench and their comparison table.

A change is measured against what it replaces in one call on one GPU: the variants differ only by
environment variables (a temporary switch in the measured copy of the code, or a knob), and run
interleaved (A, B, A, B, ...) so that drift of the machine shows as a difference between two runs
of the same variant instead of as a speed-up.

  bench/ab.py run --bench BIN --out DIR --variant old:FMOE_X=1 --variant new: \\
      --order old,new,old,new -- --preset qwen3-30b-a3b-tp1 --m 1,8 --formats bf16 --no-ceilings
  bench/ab.py compare --base old DIR/1_old DIR/2_new DIR/3_old DIR/4_new > table.md
  bench/ab.py stages DIR/1_old DIR/2_new > stages.txt   # each point's stage breakdown, one line per run

A variant can also run its own binary (--variant-bench NAME=PATH), e.g. builds of a branch and of
main: still interleaved on one GPU, but then two binaries differ, not only a switch.

`run` writes DIR/<i>_<variant>/ (fusedmoe-bench's --out-dir, its JSON and CSV) plus the log of
each run, then prints the comparison. `compare` reads the run folders (named <i>_<variant>, or
give --label per folder) and prints a markdown table: the median time of every point in every
run, and per non-base variant the ratio of its mean to the base variant's mean (< 1: faster),
with the geometric mean over the points that are OK in every run. A point that is not OK in some
run is listed with its status and left out of the geometric mean.
"""
import argparse
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import load_json  # noqa: E402  (a JSON file or its .gz copy, as bench/results stores it)


def load_points(run_dir):
    """{(preset, format, routing, M): (median_ms or None, status)} of one fusedmoe-bench run."""
    doc = load_json(os.path.join(run_dir, "fusedmoe-bench.json"))
    pts = {}
    for p in doc.get("points", []):
        key = (p["preset"], p["format"], p["routing"], int(p["M"]))
        pts[key] = (p.get("median_ms"), p.get("status", "?"))
    return doc, pts


def label_of(run_dir):
    """'2_new' -> 'new' (the folder names `run` writes); any other name is its own label."""
    name = os.path.basename(os.path.normpath(run_dir))
    head, _, tail = name.partition("_")
    return tail if head.isdigit() and tail else name


STAGES = ("permute", "gemm1", "activation", "gemm2", "finalize")


def stages(run_dirs):
    """One line per point of each run: folder, point, status, median and the stage breakdown (µs)."""
    out = []
    for d in run_dirs:
        doc, _ = load_points(d)
        name = os.path.basename(os.path.normpath(d))
        for p in doc.get("points", []):
            s = p.get("stages") or {}
            cols = " ".join(f"{k}={(s.get(k + '_ms') or 0) * 1e3:.1f}" for k in STAGES)
            out.append(f"{name} {p['preset']} {p['format']} {p['routing']} M={p['M']} {p.get('status', '?')} "
                       f"med={(p.get('median_ms') or 0) * 1e3:.1f} {cols}\n")
    return "".join(out)


def compare(run_dirs, labels, base):
    """The markdown comparison of the runs (labels[i] names the variant of run_dirs[i])."""
    if base not in labels:
        raise ValueError(f"base variant '{base}' is not among the runs ({', '.join(sorted(set(labels)))})")
    runs = [load_points(d) for d in run_dirs]
    others = [v for v in dict.fromkeys(labels) if v != base]
    keys = []
    for _, pts in runs:
        keys += [k for k in pts if k not in keys]
    head = ["preset", "format", "routing", "M"] + [f"{l} µs" for l in labels] + [f"{v} / {base}" for v in others]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 4 + "---:|" * (len(labels) + len(others))]
    logs = {v: [] for v in others}
    skipped = 0
    for key in keys:
        cells, by_label, ok = [], {}, True
        for label, (_, pts) in zip(labels, runs):
            ms, status = pts.get(key, (None, "absent"))
            if status != "OK" or ms is None:
                ok = False
                cells.append(status)
            else:
                cells.append(f"{ms * 1000:.1f}")
                by_label.setdefault(label, []).append(ms)
        ratios = []
        for v in others:
            if ok:
                r = (sum(by_label[v]) / len(by_label[v])) / (sum(by_label[base]) / len(by_label[base]))
                logs[v].append(math.log(r))
                ratios.append(f"{r:.3f}")
            else:
                ratios.append("")
        skipped += 0 if ok else 1
        lines.append("| " + " | ".join([key[0], key[1], key[2], str(key[3])] + cells + ratios) + " |")
    lines.append("")
    for v in others:
        if logs[v]:
            lines.append(f"Geometric mean of {v} / {base} over {len(logs[v])} points: "
                         f"{math.exp(sum(logs[v]) / len(logs[v])):.3f}.")
        else:
            lines.append(f"No point is OK in every run: no geometric mean of {v} / {base}.")
    if skipped:
        lines.append(f"{skipped} point(s) not OK in some run, left out of the geometric mean.")
    commits = {doc.get("commit") for doc, _ in runs}
    devices = {(doc.get("device") or {}).get("name") for doc, _ in runs}
    lines.append(f"Runs: {len(runs)} ({', '.join(labels)}); commit {', '.join(sorted(map(str, commits)))}; "
                 f"device {', '.join(sorted(map(str, devices)))}.")
    return "\n".join(lines) + "\n"


def parse_variant(spec):
    """'name:K=V,K2=V2' -> (name, {K: V}); 'name:' or 'name' -> (name, {})."""
    name, _, envs = spec.partition(":")
    if not name or "/" in name or "," in name:
        raise ValueError(f"variant name '{name}': non-empty, no '/' or ','")
    env = {}
    for item in filter(None, envs.split(",")):
        k, eq, v = item.partition("=")
        if not eq or not k:
            raise ValueError(f"variant '{spec}': '{item}' is not NAME=VALUE")
        env[k] = v
    return name, env


def run(args, bench_args):
    variants = dict(parse_variant(s) for s in args.variant)
    order = args.order.split(",") if args.order else list(variants) * 2
    unknown = [o for o in order if o not in variants]
    if unknown:
        raise ValueError(f"--order names {unknown}, not among the variants {list(variants)}")
    benches = {}
    for spec in getattr(args, "variant_bench", None) or []:
        name, eq, path = spec.partition("=")
        if not eq or not path or name not in variants:
            raise ValueError(f"--variant-bench '{spec}': NAME=PATH with NAME one of {list(variants)}")
        benches[name] = path
    missing = [v for v in variants if v not in benches and not args.bench]
    if missing:
        raise ValueError(f"no binary for variant(s) {missing}: give --bench or --variant-bench NAME=PATH")
    # Every variant's variables are unset in the others, so a switch cannot leak between runs.
    all_vars = {k for env in variants.values() for k in env}
    dirs = []
    for i, name in enumerate(order, 1):
        d = os.path.join(args.out, f"{i}_{name}")
        os.makedirs(d, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in all_vars}
        env.update(variants[name])
        cmd = [benches.get(name, args.bench)] + bench_args + ["--out-dir", d]
        print(f"[ab] run {i}/{len(order)}: {name} {variants[name] or ''}", file=sys.stderr, flush=True)
        with open(os.path.join(d, "bench.log"), "w") as log:
            rc = subprocess.call(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        if rc != 0:
            print(f"[ab] run {i} ({name}) exited {rc}: see {d}/bench.log", file=sys.stderr)
        dirs.append(d)
    return compare(dirs, order, args.base or order[0])


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    bench_args = []
    if "--" in argv:
        i = argv.index("--")
        argv, bench_args = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the variants interleaved, then compare")
    r.add_argument("--bench", help="the fusedmoe-bench binary (of every variant without --variant-bench)")
    r.add_argument("--variant-bench", action="append", help="NAME=PATH: that variant's own binary (repeat)")
    r.add_argument("--out", required=True, help="folder for the runs")
    r.add_argument("--variant", action="append", required=True, help="NAME:VAR=VALUE,... (repeat)")
    r.add_argument("--order", help="comma-separated variant names (default: every variant, twice)")
    r.add_argument("--base", help="the variant the others are compared with (default: the first run)")
    c = sub.add_parser("compare", help="compare run folders")
    c.add_argument("dirs", nargs="+")
    c.add_argument("--label", action="append", help="variant of each folder, in order (default: from the name)")
    c.add_argument("--base", help="the base variant (default: the first folder's)")
    st = sub.add_parser("stages", help="the stage breakdown of every point of run folders, one line each")
    st.add_argument("dirs", nargs="+")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "run":
            sys.stdout.write(run(args, bench_args))
        elif args.cmd == "stages":
            sys.stdout.write(stages(args.dirs))
        else:
            labels = args.label or [label_of(d) for d in args.dirs]
            if len(labels) != len(args.dirs):
                raise ValueError(f"{len(labels)} --label for {len(args.dirs)} folders")
            sys.stdout.write(compare(args.dirs, labels, args.base or labels[0]))
    except (ValueError, OSError, KeyError, json.JSONDecodeError) as e:
        print(f"ab.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
