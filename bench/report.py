#!/usr/bin/env python3
"""Merge fusedmoe-bench's JSON with the peers' JSON into a markdown report with plots.

  report.py --bench OUT/fusedmoe-bench.json [--peers OUT/peers.json]
            [--repeat OUT/repeat/fusedmoe-bench.json] [--results-dir bench/results]
            [--command "the exact command"] [--no-plots]

Writes <results-dir>/<date>-<device>.md and, next to it, <date>-<device>-<preset>-roofline.png
(% of roofline vs M, a line per format) and <date>-<device>-<preset>-time.png (median time vs M,
fusedmoe formats and peers). Prints the markdown file's path.

The peer columns hold the peer's median time and "fusedmoe/peer", the speed ratio
peer time / fusedmoe time (> 1: fusedmoe is faster). A fusedmoe format is compared with the peers
of the same numerics: bf16 with the bf16 peers; fp8-tensor with the per-tensor fp8 loop and the
rowwise fp8 grouped GEMM; fp8-channel with the rowwise one and the per-tensor loop; the 4-bit
formats with the bf16 peers on pre-dequantised weights (mxfp4-fp8 and w4a8-int4 also with the
rowwise fp8 grouped GEMM on weights requantised to fp8).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections import OrderedDict, defaultdict

# fusedmoe format -> peer formats it is compared with, in column order.
PEER_COMPARE = {
    "bf16": ["bf16"],
    "fp8-tensor": ["fp8-tensor", "fp8-rowwise"],
    "fp8-channel": ["fp8-rowwise", "fp8-tensor"],
    # 4-bit weights: the peers run the layer on the weights dequantised ahead of time (what a
    # Hopper user without 4-bit kernels does): bf16, and ready fp8 for the fp8-activation formats.
    "mxfp4": ["bf16"],
    "nvfp4": ["bf16"],
    "nvfp4-w4a4": ["bf16"],
    "mxfp4-fp8": ["bf16", "fp8-rowwise"],
    "w4a8-int4": ["bf16", "fp8-rowwise"],
}
PEER_ORDER = ["torch-loop", "torch-grouped-mm", "torch-loop-fp8", "torch-scaled-grouped-mm"]


# ---------------------------------------------------------------- data
def load_json(path):
    """A JSON file, or its gzipped copy (PATH.gz: how bench/results stores the large ones)."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    if path.endswith(".gz"):
        import gzip
        with gzip.open(path, "rt") as f:
            return json.load(f)
    with open(path) as f:
        return json.load(f)


def json_exists(path):
    """load_json can read it: the file or its gzipped copy."""
    return os.path.exists(path) or os.path.exists(path + ".gz")


def device_slug(name: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", (name or "unknown").lower()).strip("-")
    return s or "unknown"


def point_key(p) -> tuple:
    return (p["preset"], p["format"], p["routing"], int(p["M"]))


def speed_ratio(peer_ms, fused_ms):
    """fusedmoe/peer speed ratio = peer time / fusedmoe time; None if either is missing."""
    if peer_ms is None or fused_ms is None:
        return None
    if not (isinstance(peer_ms, (int, float)) and isinstance(fused_ms, (int, float))):
        return None
    if fused_ms <= 0 or peer_ms <= 0 or math.isnan(peer_ms) or math.isnan(fused_ms):
        return None
    return peer_ms / fused_ms


def peer_index(peers) -> dict:
    """(preset, routing, M) -> {peer name: record}."""
    idx = defaultdict(dict)
    for r in (peers or {}).get("points", []):
        idx[(r["preset"], r["routing"], int(r["M"]))][r["peer"]] = r
    return idx


def peer_names(peers) -> list:
    names = {r["peer"] for r in (peers or {}).get("points", [])}
    return [n for n in PEER_ORDER if n in names] + sorted(n for n in names if n not in PEER_ORDER)


def merge(bench, peers) -> list:
    """One row per fusedmoe point, with the comparable peers' times and speed ratios."""
    idx = peer_index(peers)
    rows = []
    for p in bench.get("points", []):
        row = {"point": p, "peers": OrderedDict()}
        comparable = PEER_COMPARE.get(p["format"], [])
        recs = idx.get((p["preset"], p["routing"], int(p["M"])), {})
        for name in peer_names(peers):
            r = recs.get(name)
            if r is None or r.get("format") not in comparable:
                continue
            ok = r.get("status") == "OK" and r.get("median_ms")
            row["peers"][name] = {
                "median_ms": r.get("median_ms") if ok else None,
                "status": r.get("status"),
                "note": r.get("note", ""),
                "format": r.get("format"),
                "ratio": speed_ratio(r.get("median_ms"), p.get("median_ms")) if ok else None,
            }
        rows.append(row)
    return rows


def repeat_diffs(bench, repeat) -> list:
    """Points timed in both runs: t1, t2 (median ms) and (t2 - t1) / t1 in percent."""
    if not repeat:
        return []
    first = {point_key(p): p for p in bench.get("points", []) if p.get("median_ms")}
    out = []
    for p in repeat.get("points", []):
        q = first.get(point_key(p))
        if q is None or not p.get("median_ms"):
            continue
        t1, t2 = q["median_ms"], p["median_ms"]
        out.append({"preset": p["preset"], "format": p["format"], "routing": p["routing"], "M": int(p["M"]),
                    "t1_ms": t1, "t2_ms": t2, "diff_pct": (t2 - t1) / t1 * 100.0,
                    "spread1_pct": _spread_pct(q), "spread2_pct": _spread_pct(p)})
    return out


def _spread_pct(p):
    if p.get("p10_ms") is None or p.get("p90_ms") is None or not p.get("median_ms"):
        return None
    return (p["p90_ms"] - p["p10_ms"]) / p["median_ms"] * 100.0


def _median(xs):
    xs = sorted(xs)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


# ---------------------------------------------------------------- formatting
def fnum(x, fmt="{:.1f}", dash="–"):
    if x is None:
        return dash
    try:
        if isinstance(x, float) and math.isnan(x):
            return dash
    except TypeError:
        return dash
    return fmt.format(x)


def us(ms):
    return None if ms is None else ms * 1e3


def _md_escape(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def check_cell(p):
    c = p.get("check") or {}
    if p.get("status") == "DRY":
        return "dry run"
    if not c.get("checked"):
        return "–"
    err = c.get("rel_err")
    return f"{fnum(err, '{:.1e}')} (tol {fnum(c.get('tol'), '{:.0e}')}, {c.get('tokens')} tok)"


def ceilings_table(bench, repeat=None) -> str:
    c = bench.get("ceilings", {})
    r = (repeat or {}).get("ceilings", {})
    rows = [
        ("HBM read bandwidth", "hbm_read_tbps", "TB/s", "{:.2f}", c.get("hbm_read_config", "")),
        ("device copy bandwidth (read + write)", "copy_tbps", "TB/s", "{:.2f}", "cudaMemcpyAsync D2D"),
        ("BF16 matmul (cuBLASLt)", "bf16_tflops", "TFLOP/s", "{:.0f}", "TN, fp32 accumulate"),
        ("FP8 e4m3 matmul (cuBLASLt)", "fp8_tflops", "TFLOP/s", "{:.0f}", "TN, fp32 scales"),
        ("FP8 e4m3 matmul, fast accumulation", "fp8_fast_accum_tflops", "TFLOP/s", "{:.0f}", "CUBLASLT_MATMUL_DESC_FAST_ACCUM"),
        ("FP32 SIMT matmul (cuBLASLt)", "fp32_simt_tflops", "TFLOP/s", "{:.1f}", "CUBLAS_COMPUTE_32F"),
        ("TF32 matmul (cuBLASLt)", "tf32_tflops", "TFLOP/s", "{:.0f}", "CUBLAS_COMPUTE_32F_FAST_TF32"),
    ]
    def val(d, key, fmt):
        v = d.get(key)
        return fnum(v if isinstance(v, (int, float)) and v > 0 else None, fmt)

    out = ["| ceiling | value | repeat run | unit | how |", "|---|---:|---:|---|---|"]
    for label, key, unit, fmt, how in rows:
        out.append(f"| {label} | {val(c, key, fmt)} | {val(r, key, fmt) if repeat else '–'} | {unit} | "
                   f"{_md_escape(how)} |")
    out.append("")
    out.append(f"Roofline rates used: bf16/fp16 formats and mxfp4 / nvfp4 (their weights are decoded to bf16 "
               f"and run on 16-bit tensor cores, whatever the activation type) at the BF16 "
               f"rate; fp8 formats and w4a8-int4 (int4 decoded to e4m3 for the fp8 tensor cores) at the FP8 "
               f"rate ({_md_escape(c.get('fp8_rate_used', ''))}); "
               f"fp32 at {_md_escape(c.get('fp32_rate_used', ''))}.")
    if c.get("errors"):
        out.append(f"\nCeiling errors: {_md_escape(c['errors'])}")
    return "\n".join(out)


def device_lines(bench, peers) -> list:
    d = bench.get("device", {})
    if bench.get("dry_run"):
        lines = ["- device: none (fusedmoe-bench --dry-run)"]
        if peers:
            lines.append(f"- peers: PyTorch {peers.get('torch_version', '?')} on {peers.get('device', {}).get('name', '?')}")
        return lines
    lines = [f"- device: {d.get('name', '?')} (cc {d.get('compute_capability', '?')}, {d.get('sm_count', '?')} SMs, "
             f"L2 {fnum((d.get('l2_bytes') or 0) / 1e6, '{:.0f}')} MB, {fnum((d.get('mem_bytes') or 0) / 1e9, '{:.1f}')} GB)",
             f"- driver {d.get('driver_version') or '?'}, CUDA driver {d.get('cuda_driver_version', '?')}, "
             f"runtime {d.get('cuda_runtime_version', '?')}",
             f"- clocks: peak SM {d.get('peak_sm_clock_mhz', '?')} MHz / memory {d.get('peak_mem_clock_mhz', '?')} MHz; "
             f"NVML max SM {d.get('max_sm_clock_mhz', '?')} MHz, power limit {fnum(d.get('power_limit_w'), '{:.0f}')} W"]
    for c in d.get("clocks", []):
        lines.append(f"  - {c.get('when')}: SM {c.get('sm_mhz')} MHz, memory {c.get('mem_mhz')} MHz, "
                     f"{c.get('temperature_c')} C, {fnum(c.get('power_w'), '{:.0f}')} W")
    if peers:
        have = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in peers.get("available", {}).items())
        lines.append(f"- peers: PyTorch {peers.get('torch_version', '?')} (CUDA {peers.get('cuda_version', '?')}); {have}")
    return lines


def results_tables(rows, peers) -> str:
    names = peer_names(peers)
    by_preset = OrderedDict()
    for r in rows:
        by_preset.setdefault(r["point"]["preset"], []).append(r)
    out = []
    for preset, rs in by_preset.items():
        p0 = rs[0]["point"]
        out.append(f"### {preset} (E={p0['E']}, top-{p0['topk']}, K={p0['K']}, N={p0['N']}, {p0['activation']}"
                   f"{', ep=' + str(p0['ep']) if p0.get('ep', 1) > 1 else ''})\n")
        head = ["format", "routing", "M", "experts hit", "median µs", "p10–p90 µs", "TFLOP/s", "TB/s", "% roofline",
                "bound", "check", "status"]
        used = [n for n in names if any(n in r["peers"] for r in rs)]
        head += [f"{n} µs (fusedmoe/peer)" for n in used]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "|".join(["---"] * 2 + ["---:"] * 7 + ["---"] * 3 + ["---:"] * len(used)) + "|")
        for r in rs:
            p = r["point"]
            cells = [p["format"], p["routing"], str(p["M"]), str(p.get("experts_hit", "")),
                     fnum(us(p.get("median_ms"))),
                     (f"{fnum(us(p.get('p10_ms')))}–{fnum(us(p.get('p90_ms')))}" if p.get("p10_ms") is not None else "–"),
                     fnum(p.get("tflops")), fnum(p.get("tbps"), "{:.2f}"), fnum(p.get("pct_roofline")),
                     p.get("bound") or "–", check_cell(p), p.get("status", "")]
            for n in used:
                e = r["peers"].get(n)
                if e is None:
                    cells.append("")
                elif e["median_ms"] is None:
                    cells.append(e.get("status") or "–")
                elif e["ratio"] is None:
                    cells.append(fnum(us(e["median_ms"])))
                else:
                    cells.append(f"{fnum(us(e['median_ms']))} ({e['ratio']:.2f}×)")
            out.append("| " + " | ".join(_md_escape(c) for c in cells) + " |")
        out.append("")
    return "\n".join(out)


def stage_table(bench) -> str:
    pts = [p for p in bench.get("points", []) if p.get("stages")]
    if not pts:
        return "No stage breakdown in this run."
    out = ["| preset | format | routing | M | permute | GEMM1 | activation | GEMM2 | finalize | total (µs) |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for p in pts:
        s = p["stages"]
        out.append(f"| {p['preset']} | {p['format']} | {p['routing']} | {p['M']} | " + " | ".join(
            fnum(us(s.get(k))) for k in ("permute_ms", "gemm1_ms", "activation_ms", "gemm2_ms", "finalize_ms",
                                         "total_ms")) + " |")
    return "\n".join(out)


def repeat_table(diffs) -> str:
    if not diffs:
        return "No repeat run in this report."
    out = ["| preset | format | routing | M | run 1 µs | run 2 µs | difference | p10–p90 spread run 1 / run 2 |",
           "|---|---|---|---:|---:|---:|---:|---:|"]
    for d in diffs:
        out.append(f"| {d['preset']} | {d['format']} | {d['routing']} | {d['M']} | {fnum(us(d['t1_ms']))} | "
                   f"{fnum(us(d['t2_ms']))} | {d['diff_pct']:+.1f}% | {fnum(d['spread1_pct'])}% / "
                   f"{fnum(d['spread2_pct'])}% |")
    absd = [abs(d["diff_pct"]) for d in diffs]
    out.append("")
    out.append(f"Median |difference| {fnum(_median(absd), '{:.1f}')}%, largest {max(absd):.1f}% over {len(diffs)} "
               f"points: differences between versions smaller than this are noise.")
    return "\n".join(out)


def notes_section(bench, peers) -> str:
    groups = OrderedDict()
    for p in bench.get("points", []):
        if p.get("status") in ("OK", "DRY"):
            continue
        k = (p["status"], p["preset"], p["format"], p.get("note", ""))
        groups[k] = groups.get(k, 0) + 1
    for r in (peers or {}).get("points", []):
        if r.get("status") == "OK":
            continue
        k = (r.get("status"), r["preset"], "peer " + r["peer"], r.get("note", ""))
        groups[k] = groups.get(k, 0) + 1
    if not groups:
        return "None."
    return "\n".join(f"- {s} {pre} {fmt}: {_md_escape(note) or '(no note)'}" + (f" (×{n})" if n > 1 else "")
                     for (s, pre, fmt, note), n in groups.items())


# ---------------------------------------------------------------- plots
def _m_axis(ax, ms):
    ax.set_xscale("log", base=2)
    ms = sorted(set(ms))
    if ms:
        ax.set_xticks(ms)
        ax.set_xticklabels([str(m) for m in ms])
        ax.minorticks_off()
    ax.set_xlabel("tokens M")


def make_plots(bench, peers, out_dir, stem) -> list:
    """PNG plots next to the report. Returns [(title, file name)]; [] without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    files = []
    presets = OrderedDict((p["preset"], None) for p in bench.get("points", []))
    routings = sorted({p["routing"] for p in bench.get("points", [])})
    multi_routing = len(routings) > 1
    pidx = peer_index(peers)
    for preset in presets:
        pts = [p for p in bench["points"] if p["preset"] == preset]
        series = OrderedDict()
        for p in pts:
            label = p["format"] + (f" / {p['routing']}" if multi_routing else "")
            series.setdefault(label, []).append(p)
        # % of roofline vs M
        fig, ax = plt.subplots(figsize=(7, 4.2))
        drawn = False
        for label, ps in series.items():
            xy = sorted((p["M"], p["pct_roofline"]) for p in ps if p.get("pct_roofline") is not None)
            if xy:
                ax.plot([x for x, _ in xy], [y for _, y in xy], marker="o", label=label)
                drawn = True
        if drawn:
            ax.axhline(100, color="gray", linestyle=":", linewidth=1)
            _m_axis(ax, [p["M"] for p in pts])
            ax.set_ylabel("% of roofline")
            ax.set_title(f"{preset}: % of roofline")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7, ncol=2)
            name = f"{stem}-{preset}-roofline.png"
            fig.tight_layout()
            fig.savefig(os.path.join(out_dir, name), dpi=110)
            files.append((f"{preset}: % of roofline vs M", name))
        plt.close(fig)
        # time vs M, with peers
        fig, ax = plt.subplots(figsize=(7, 4.2))
        drawn = False
        for label, ps in series.items():
            xy = sorted((p["M"], p["median_ms"] * 1e3) for p in ps if p.get("median_ms"))
            if xy:
                ax.plot([x for x, _ in xy], [y for _, y in xy], marker="o", label=f"fusedmoe {label}")
                drawn = True
        peer_series = OrderedDict()
        for (pre, routing, M), recs in pidx.items():
            if pre != preset:
                continue
            for name, r in recs.items():
                if r.get("status") == "OK" and r.get("median_ms"):
                    label = name + (f" / {routing}" if multi_routing else "")
                    peer_series.setdefault(label, []).append((M, r["median_ms"] * 1e3))
        for label, xy in peer_series.items():
            xy.sort()
            ax.plot([x for x, _ in xy], [y for _, y in xy], marker="x", linestyle="--", label=label)
            drawn = True
        if drawn:
            ax.set_yscale("log")
            _m_axis(ax, [p["M"] for p in pts])
            ax.set_ylabel("median time (µs)")
            ax.set_title(f"{preset}: time vs M")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7, ncol=2)
            name = f"{stem}-{preset}-time.png"
            fig.tight_layout()
            fig.savefig(os.path.join(out_dir, name), dpi=110)
            files.append((f"{preset}: median time vs M, with peers", name))
        plt.close(fig)
    return files


# ---------------------------------------------------------------- report
def render(bench, peers=None, repeat=None, command=None, plots=None, plots_note="") -> str:
    rows = merge(bench, peers)
    date = (bench.get("date_utc") or "")[:10] or "unknown date"
    dev = bench.get("device", {}).get("name", "unknown device")
    lines = [f"# fusedmoe benchmark: {dev}, {date}", ""]
    lines.append(f"- commit: `{bench.get('commit', 'unknown')}`")
    if command:
        lines.append(f"- command: `{command}`")
    lines.append(f"- fusedmoe-bench command: `{bench.get('command', '')}`")
    if peers:
        lines.append(f"- peers command: `{peers.get('command', '')}`")
    if repeat:
        lines.append(f"- repeat command: `{repeat.get('command', '')}`")
    lines.append(f"- run: {bench.get('date_utc', '')}, {fnum(bench.get('wall_s'), '{:.0f}')} s"
                 + (" (DRY RUN: no GPU, no times)" if bench.get("dry_run") else ""))
    lines += device_lines(bench, peers)
    if peers and peers.get("smoke_test"):
        lines.append("- **the peers ran as a CPU smoke test: their times are not measurements**")
    lines += ["", "## Ceilings (measured in the same run)", "", ceilings_table(bench, repeat), ""]
    m = bench.get("method", {})
    lines += ["## Method", "", _md_escape(m.get("description", "")), "",
              f"Warm-up {m.get('warmup')}, reps between {m.get('min_reps')} and {m.get('max_reps')} "
              f"(about {m.get('target_ms')} ms of timed work per point), graphs for M ≤ {m.get('graph_max_m')}, "
              f"{m.get('rotate')} rotated input sets, L2 flush {fnum((m.get('flush_bytes') or 0) / 2**20, '{:.0f}')} MiB "
              f"({m.get('flush_mode', 'write')}), "
              f"oracle sample up to {m.get('check_tokens')} tokens, fp8-tensor activation scales "
              f"{m.get('fp8_act_scale')}.", "",
              "fusedmoe/peer is the speed ratio peer time / fusedmoe time (> 1: fusedmoe faster). "
              "The loop peers' per-expert index lists are precomputed on the host (not timed); the grouped "
              "peers sort on the device inside the timed region.", ""]
    lines += ["## Results", "", results_tables(rows, peers)]
    lines += ["## Stage breakdown (Layer::run_timed, median of runs)", "", stage_table(bench), ""]
    lines += ["## Plots", ""]
    if plots:
        for title, name in plots:
            lines.append(f"![{title}]({name})")
            lines.append("")
    else:
        lines.append(plots_note or "No plots.")
        lines.append("")
    lines += ["## Timing variance (the same points run twice)", "", repeat_table(repeat_diffs(bench, repeat)), ""]
    lines += ["## Skipped, failed, errors", "", notes_section(bench, peers), ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True, help="fusedmoe-bench.json")
    ap.add_argument("--peers", help="peers.json")
    ap.add_argument("--repeat", help="fusedmoe-bench.json of a repeat run of some of the same points")
    ap.add_argument("--results-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    ap.add_argument("--command", help="the exact command that produced these results")
    ap.add_argument("--name", help="file stem (default <date>-<device>)")
    ap.add_argument("--no-plots", action="store_true")
    a = ap.parse_args(argv)
    bench = load_json(a.bench)
    peers = load_json(a.peers) if a.peers and json_exists(a.peers) else None
    repeat = load_json(a.repeat) if a.repeat and json_exists(a.repeat) else None
    date = (bench.get("date_utc") or "")[:10] or "undated"
    stem = a.name or f"{date}-{device_slug(bench.get('device', {}).get('name', ''))}"
    os.makedirs(a.results_dir, exist_ok=True)
    plots, note = [], ""
    if a.no_plots:
        note = "Plots not made (--no-plots)."
    else:
        plots = make_plots(bench, peers, a.results_dir, stem)
        if not plots:
            note = "No plots: matplotlib is not installed, or no point has a time."
    md = render(bench, peers, repeat, a.command, plots, note)
    path = os.path.join(a.results_dir, stem + ".md")
    with open(path, "w") as f:
        f.write(md)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
