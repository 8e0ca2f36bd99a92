#!/usr/bin/env python3
"""Peer implementations timed on the same shapes and routing as fusedmoe-bench.

Reads the JSON that fusedmoe-bench wrote (--bench-json), takes every (preset, M, routing) point in
it, loads the routing the bench used (routing/*_ids.npy, *_weights.npy next to the JSON) and times:

  torch-loop               bf16: a plain PyTorch loop over the experts (gather, two matmuls, the
                           activation, weighted index_add); compared with fusedmoe bf16
  torch-grouped-mm         bf16: torch._grouped_mm for both GEMMs, with the permutation (argsort,
                           counts, offsets) done on the device inside the timed region
  torch-loop-fp8           fp8 per-tensor: the loop with torch._scaled_mm per expert, dynamic
                           per-tensor activation scales; compared with fusedmoe fp8-tensor
  torch-scaled-grouped-mm  fp8 rowwise: torch._scaled_grouped_mm, per-token activation and
                           per-channel weight scales; compared with fusedmoe fp8-channel and fp8-tensor

Timing as in fusedmoe-bench: warm-up; per rep an L2 flush (fill of a buffer > L2, not timed), a
start event, the work (a CUDA-graph replay for M <= --graph-max-m), a stop event; median and p10/p90.
The loop peers get their per-expert index lists precomputed on the host (the routing is fixed),
so their routing bookkeeping is not timed; the grouped peers sort on the device inside the timing.
Each peer's output is first checked against a float32 reference on sampled tokens.

Writes --out (default: peers.json next to the bench JSON). Needs PyTorch with CUDA.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import sys
import time

import numpy as np

GATED = {"silu", "gelu", "gelu_tanh", "swigluoai"}
PEERS = ("torch-loop", "torch-grouped-mm", "torch-loop-fp8", "torch-scaled-grouped-mm")
# The peer's own format label, and the fusedmoe formats whose points make the peer run.
PEER_FORMAT = {
    "torch-loop": "bf16",
    "torch-grouped-mm": "bf16",
    "torch-loop-fp8": "fp8-tensor",
    "torch-scaled-grouped-mm": "fp8-rowwise",
}
# The 4-bit formats have no 4-bit peer on Hopper in PyTorch: what users run instead is the layer
# in bf16 (weights dequantised) and, for fp8 activations, the fp8 rowwise grouped GEMM.
W4_BF16_ACT = {"mxfp4", "nvfp4", "nvfp4-w4a4"}
W4_FP8_ACT = {"w4a8-int4", "mxfp4-fp8"}
PEER_TRIGGERS = {
    "torch-loop": {"bf16"} | W4_BF16_ACT | W4_FP8_ACT,
    "torch-grouped-mm": {"bf16"} | W4_BF16_ACT | W4_FP8_ACT,
    "torch-loop-fp8": {"fp8-tensor", "fp8-channel"},
    "torch-scaled-grouped-mm": {"fp8-tensor", "fp8-channel"} | W4_FP8_ACT,
}
PEER_TOL = {"bf16": 2e-2, "fp8-tensor": 1e-1, "fp8-rowwise": 1e-1}


# ---------------------------------------------------------------- pure helpers (tested on CPU)
def parse_shape_spec(spec: str) -> dict:
    """'name=x,E=8,topk=2,K=..,N=..,act=silu,bias=0,router_on_input=0,ep=1' -> dict."""
    out = {"bias": False, "router_on_input": False, "ep": 1, "act": "silu"}
    for kv in spec.split(","):
        if not kv.strip():
            continue
        k, _, v = kv.partition("=")
        k = k.strip()
        v = v.strip()
        if k in ("E", "topk", "K", "N", "ep"):
            out[k] = int(v)
        elif k in ("bias", "router_on_input", "interleaved"):
            out[k] = v in ("1", "true", "yes")
        else:
            out[k] = v
    return out


def shapes_from_bench(bench: dict) -> dict:
    """preset name -> shape dict, from the bench JSON's 'shapes' specs (points as a fallback)."""
    shapes = {}
    for spec in bench.get("shapes", []):
        s = parse_shape_spec(spec)
        shapes[s["name"]] = s
    for p in bench.get("points", []):
        if p["preset"] not in shapes:
            shapes[p["preset"]] = {"name": p["preset"], "E": p["E"], "topk": p["topk"], "K": p["K"], "N": p["N"],
                                   "act": p["activation"], "ep": p.get("ep", 1), "bias": False,
                                   "router_on_input": False}
    return shapes


def select_cases(bench: dict, peers=PEERS, presets=None, ms=None, routings=None) -> list:
    """The (preset, M, routing) cases to run and which peers each needs, in bench order."""
    cases = {}
    for p in bench.get("points", []):
        if presets and p["preset"] not in presets:
            continue
        if ms and p["M"] not in ms:
            continue
        if routings and p["routing"] not in routings:
            continue
        key = (p["preset"], p["M"], p["routing"])
        c = cases.setdefault(key, {"preset": p["preset"], "M": p["M"], "routing": p["routing"],
                                   "routing_file": p["routing_file"],
                                   "routing_weights_file": p.get("routing_weights_file", ""),
                                   "peers": []})
        for peer in peers:
            if p["format"] in PEER_TRIGGERS[peer] and peer not in c["peers"]:
                c["peers"].append(peer)
    return [c for c in cases.values() if c["peers"]]


def local_ids(ids: np.ndarray, E: int, ep: int) -> np.ndarray:
    """Global -> local expert ids of rank 0 of ep ranks; -1 where the slot selects nothing."""
    local = E // ep
    out = ids.astype(np.int64).copy()
    out[(out < 0) | (out >= local)] = -1
    return out


def slot_lists(ids_local: np.ndarray, weights: np.ndarray):
    """Valid slots sorted by (expert, token): token index, weight, expert, and per-expert segments."""
    M, topk = ids_local.shape
    flat = ids_local.reshape(-1)
    valid = np.nonzero(flat >= 0)[0]
    order = valid[np.argsort(flat[valid], kind="stable")]
    tok = order // topk
    w = weights.reshape(-1)[order].astype(np.float32)
    exp = flat[order]
    segs = []
    if len(order):
        starts = np.nonzero(np.r_[True, exp[1:] != exp[:-1]])[0]
        ends = np.r_[starts[1:], len(order)]
        segs = [(int(exp[s]), int(s), int(e)) for s, e in zip(starts, ends)]
    return tok, w, exp, segs, valid


def flops_of(shape: dict, valid_slots: int) -> float:
    R = 2 * shape["N"] if shape["act"] in GATED else shape["N"]
    return 2.0 * valid_slots * (R * shape["K"] + shape["K"] * shape["N"])


def summarize(ms: list) -> dict:
    if not ms:
        return {"reps": 0, "median_ms": None, "p10_ms": None, "p90_ms": None, "min_ms": None}
    a = np.sort(np.asarray(ms, dtype=np.float64))
    return {"reps": int(len(a)), "median_ms": float(np.percentile(a, 50)), "p10_ms": float(np.percentile(a, 10)),
            "p90_ms": float(np.percentile(a, 90)), "min_ms": float(a[0])}


# ---------------------------------------------------------------- GPU part
def _torch():
    import torch  # noqa: WPS433 (imported late so the pure helpers work without torch)

    return torch


class Shape:
    """Weights of one preset in bf16, and their fp8 variants on demand."""

    def __init__(self, torch, shape: dict, seed: int, device):
        self.t = torch
        self.s = shape
        self.E = shape["E"] // shape["ep"]
        self.K, self.N = shape["K"], shape["N"]
        self.R = 2 * self.N if shape["act"] in GATED else self.N
        g = torch.Generator(device=device)
        g.manual_seed(seed)
        b1, b2 = 3.0 / math.sqrt(self.K), 3.0 / math.sqrt(self.N)
        bf16 = torch.bfloat16
        self.w13 = torch.empty(self.E, self.R, self.K, dtype=bf16, device=device).uniform_(-b1, b1, generator=g)
        self.w2 = torch.empty(self.E, self.K, self.N, dtype=bf16, device=device).uniform_(-b2, b2, generator=g)
        self.b13 = self.b2 = None
        if shape.get("bias"):
            self.b13 = torch.empty(self.E, self.R, dtype=bf16, device=device).uniform_(-0.1, 0.1, generator=g)
            self.b2 = torch.empty(self.E, self.K, dtype=bf16, device=device).uniform_(-0.1, 0.1, generator=g)
        self.fp8 = None

    def act(self, h):
        t = self.t
        a = self.s["act"]
        if a == "relu2":
            return t.relu(h).square()
        if self.s.get("interleaved"):  # gate / up rows alternate (gpt-oss's checkpoint)
            g, u = h[:, 0::2], h[:, 1::2]
        else:
            g, u = h[:, : self.N], h[:, self.N:]
        if a == "silu":
            return t.nn.functional.silu(g) * u
        if a == "gelu":
            return t.nn.functional.gelu(g) * u
        if a == "gelu_tanh":
            return t.nn.functional.gelu(g, approximate="tanh") * u
        if a == "swigluoai":
            limit, alpha = 7.0, 1.702
            g = g.clamp(max=limit)
            u = u.clamp(-limit, limit)
            return (u + 1) * g * t.sigmoid(alpha * g)
        raise ValueError(f"activation {a}")

    def make_fp8(self):
        """Per-expert per-tensor e4m3 copies and per-channel (rowwise) e4m3 copies, then drop bf16."""
        t = self.t
        f8 = t.float8_e4m3fn
        q13 = t.empty(self.E, self.R, self.K, dtype=f8, device=self.w13.device)
        q2 = t.empty(self.E, self.K, self.N, dtype=f8, device=self.w13.device)
        c13 = t.empty(self.E, self.R, self.K, dtype=f8, device=self.w13.device)
        c2 = t.empty(self.E, self.K, self.N, dtype=f8, device=self.w13.device)
        s13 = t.empty(self.E, dtype=t.float32, device=self.w13.device)
        s2 = t.empty(self.E, dtype=t.float32, device=self.w13.device)
        cs13 = t.empty(self.E, self.R, dtype=t.float32, device=self.w13.device)
        cs2 = t.empty(self.E, self.K, dtype=t.float32, device=self.w13.device)
        for e in range(self.E):
            for w, q, s, c, cs in ((self.w13[e], q13, s13, c13, cs13), (self.w2[e], q2, s2, c2, cs2)):
                wf = w.float()
                s[e] = wf.abs().amax().clamp(min=1e-12) / 448.0
                q[e] = (wf / s[e]).clamp(-448, 448).to(f8)
                rs = wf.abs().amax(dim=1).clamp(min=1e-12) / 448.0
                cs[e] = rs
                c[e] = (wf / rs[:, None]).clamp(-448, 448).to(f8)
        self.fp8 = dict(q13=q13, q2=q2, s13=s13, s2=s2, c13=c13, c2=c2, cs13=cs13, cs2=cs2)
        del self.w13, self.w2
        self.w13 = self.w2 = None
        if t.cuda.is_available():
            t.cuda.empty_cache()

    def dequant(self, which: str, e: int):
        """float32 weights of expert e as the peer sees them: (W13 [R,K], W2 [K,N])."""
        if which == "bf16":
            return self.w13[e].float(), self.w2[e].float()
        f = self.fp8
        if which == "fp8-tensor":
            return f["q13"][e].float() * f["s13"][e], f["q2"][e].float() * f["s2"][e]
        return f["c13"][e].float() * f["cs13"][e][:, None], f["c2"][e].float() * f["cs2"][e][:, None]


def _u8_rows(t, x, idx):
    """index_select on an fp8 tensor through a uint8 view."""
    return x.view(t.uint8).index_select(0, idx).view(x.dtype)


def _quant_tensor(t, x):
    s = x.abs().amax().float().clamp(min=1e-12) / 448.0
    return (x.float() / s).clamp(-448, 448).to(t.float8_e4m3fn), s


def _quant_rows(t, x):
    s = x.abs().amax(dim=1).float().clamp(min=1e-12) / 448.0
    return (x.float() / s[:, None]).clamp(-448, 448).to(t.float8_e4m3fn), s


def _call_grouped(t, a, b, offs):
    try:
        return t._grouped_mm(a, b, offs=offs, out_dtype=t.bfloat16)
    except TypeError:
        return t._grouped_mm(a, b, offs)


def _call_scaled_grouped(t, a, b, sa, sb, offs):
    try:
        return t._scaled_grouped_mm(a, b, sa, sb, offs=offs, out_dtype=t.bfloat16)
    except TypeError:
        return t._scaled_grouped_mm(a, b, sa, sb, offs)


def _call_scaled_mm(t, a, b, sa, sb):
    out = t._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=t.bfloat16)
    return out[0] if isinstance(out, tuple) else out  # PyTorch < 2.5 returned (out, amax)


def build_peer(t, peer: str, W: Shape, x, ids_local: np.ndarray, weights: np.ndarray):
    """A closure computing the layer output [M, K] bf16 with this peer (static shapes: capturable)."""
    dev = x.device
    M, K = x.shape
    roi = W.s.get("router_on_input", False)
    tok_np, w_np, exp_np, segs, valid = slot_lists(ids_local, weights)
    tok = t.as_tensor(tok_np, device=dev, dtype=t.int64)
    wsl = t.as_tensor(w_np, device=dev, dtype=t.float32)
    # Device-side routing for the grouped peers: the valid slots in token order.
    flat_valid = t.as_tensor(valid, device=dev, dtype=t.int64)
    ids_valid = t.as_tensor(ids_local.reshape(-1)[valid], device=dev, dtype=t.int64)
    w_valid = t.as_tensor(weights.reshape(-1)[valid].astype(np.float32), device=dev)
    tok_valid = flat_valid // ids_local.shape[1]
    ones = t.ones(len(valid), dtype=t.int32, device=dev)
    exp_t = t.as_tensor(exp_np, device=dev, dtype=t.int64)

    def finish(out32):
        return out32.to(t.bfloat16)

    if peer == "torch-loop":
        def run():
            xs = x.index_select(0, tok)
            if roi:
                xs = (xs.float() * wsl[:, None]).to(t.bfloat16)
            out = t.zeros(M, K, dtype=t.float32, device=dev)
            for e, s, en in segs:
                h = xs[s:en] @ W.w13[e].t()
                if W.b13 is not None:
                    h = h + W.b13[e]
                y = W.act(h) @ W.w2[e].t()
                if W.b2 is not None:
                    y = y + W.b2[e]
                y = y.float() if roi else y.float() * wsl[s:en, None]
                out.index_add_(0, tok[s:en], y)
            return finish(out)
        return run

    if peer == "torch-loop-fp8":
        f = W.fp8
        T = len(tok_np)

        def run():
            xin = x
            if roi:  # the router weight scales the input rows before quantisation
                xin = (x.index_select(0, tok).float() * wsl[:, None]).to(t.bfloat16)
                xq, sx = _quant_tensor(t, xin)
                xs = xq
            else:
                xq, sx = _quant_tensor(t, xin)
                xs = _u8_rows(t, xq, tok)
            H = t.empty(T, W.R, dtype=t.bfloat16, device=dev)
            for e, s, en in segs:
                H[s:en] = _call_scaled_mm(t, xs[s:en], f["q13"][e].t(), sx, f["s13"][e])
            if W.b13 is not None:
                H = H + W.b13.index_select(0, exp_t)
            A = W.act(H)
            aq, sa = _quant_tensor(t, A)
            out = t.zeros(M, K, dtype=t.float32, device=dev)
            for e, s, en in segs:
                y = _call_scaled_mm(t, aq[s:en], f["q2"][e].t(), sa, f["s2"][e])
                if W.b2 is not None:
                    y = y + W.b2[e]
                y = y.float() if roi else y.float() * wsl[s:en, None]
                out.index_add_(0, tok[s:en], y)
            return finish(out)
        return run

    if peer in ("torch-grouped-mm", "torch-scaled-grouped-mm"):
        E = W.E
        fp8 = peer == "torch-scaled-grouped-mm"
        if fp8:
            f = W.fp8
            b13 = f["c13"].transpose(1, 2)  # [E, K, R], column-major per expert, as required
            b2 = f["c2"].transpose(1, 2)
        else:
            b13 = W.w13.transpose(1, 2)
            b2 = W.w2.transpose(1, 2)

        def run():
            order = t.argsort(ids_valid, stable=True)
            sorted_ids = ids_valid.index_select(0, order)
            counts = t.zeros(E, dtype=t.int32, device=dev).index_add_(0, ids_valid, ones)
            offs = t.cumsum(counts, 0, dtype=t.int32)
            tk = tok_valid.index_select(0, order)
            wk = w_valid.index_select(0, order)
            xs = x.index_select(0, tk)
            if roi:
                xs = (xs.float() * wk[:, None]).to(t.bfloat16)
            if fp8:
                xq, sx = _quant_rows(t, xs)
                h = _call_scaled_grouped(t, xq, b13, sx, f["cs13"], offs)
            else:
                h = _call_grouped(t, xs, b13, offs)
            if W.b13 is not None:
                h = h + W.b13.index_select(0, sorted_ids)
            a = W.act(h)
            if fp8:
                aq, sa = _quant_rows(t, a)
                y = _call_scaled_grouped(t, aq, b2, sa, f["cs2"], offs)
            else:
                y = _call_grouped(t, a, b2, offs)
            if W.b2 is not None:
                y = y + W.b2.index_select(0, sorted_ids)
            y = y.float() if roi else y.float() * wk[:, None]
            out = t.zeros(M, K, dtype=t.float32, device=dev).index_add_(0, tk, y)
            return finish(out)
        return run
    raise ValueError(peer)


def reference_rows(t, W: Shape, which: str, x, ids_local, weights, rows):
    """float32 reference of the sampled rows (weights as the peer holds them, activations unquantised)."""
    roi = W.s.get("router_on_input", False)
    out = t.zeros(len(rows), W.K, dtype=t.float32, device=x.device)
    for j, r in enumerate(rows):
        for k in range(ids_local.shape[1]):
            e = int(ids_local[r, k])
            if e < 0:
                continue
            w13, w2 = W.dequant(which, e)
            xr = x[r].float()
            if roi:
                xr = (xr * float(weights[r, k])).to(t.bfloat16).float()
            h = w13 @ xr
            if W.b13 is not None:
                h = h + W.b13[e].float()
            a = W.act(h[None, :])[0]
            y = w2 @ a
            if W.b2 is not None:
                y = y + W.b2[e].float()
            out[j] += y if roi else float(weights[r, k]) * y
    return out


class Timer:
    """CUDA: events around each rep, an L2 flush before it. CPU (smoke tests only): wall clock."""

    def __init__(self, t, flush_bytes, args, cuda=True):
        self.t = t
        self.args = args
        self.cuda = cuda
        self.flush = t.empty(flush_bytes, dtype=t.uint8, device="cuda") if (cuda and flush_bytes > 0) else None
        self.n = 0
        # fusedmoe-bench's --flush-mode (timing.hpp): read leaves the L2 clean, write (a fill)
        # leaves it full of dirty lines whose write-backs the timed run pays.
        self.flush_mode = getattr(args, "flush_mode", "read")
        if self.flush is not None and self.flush_mode == "read":
            self.flush.fill_(0x5A)
            self.flush_words = self.flush[: flush_bytes // 4 * 4].view(t.int32)

    def _flush(self):
        if self.flush is None:
            return
        self.n += 1
        if self.flush_mode == "read":
            self.flush_words.sum()  # a read pass over the buffer (result unused)
        else:
            self.flush.fill_((self.n * 37 + 1) & 0xFF)

    def _sync(self):
        if self.cuda:
            self.t.cuda.synchronize()

    def run(self, body, reps):
        t = self.t
        if not self.cuda:
            out = []
            for _ in range(reps):
                s = time.perf_counter()
                body()
                out.append((time.perf_counter() - s) * 1e3)
            return out
        ev = [(t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)) for _ in range(reps)]
        for s, e in ev:
            self._flush()
            s.record()
            body()
            e.record()
        t.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in ev]

    def time(self, fn, M):
        """Warm-up, probe, then timed reps (graph replay for small M). Returns (times, method, note)."""
        t, a = self.t, self.args
        for _ in range(a.warmup):
            fn()
        self._sync()
        est = max(1e-4, self.run(fn, 1)[0])
        reps = int(min(a.max_reps, max(a.min_reps, math.ceil(a.target_ms / est))))
        if not self.cuda:
            return self.run(fn, reps), "wall-clock", "CPU smoke run: not a measurement"
        if M <= a.graph_max_m:
            try:
                side = t.cuda.Stream()
                side.wait_stream(t.cuda.current_stream())
                with t.cuda.stream(side):
                    fn()
                t.cuda.current_stream().wait_stream(side)
                g = t.cuda.CUDAGraph()
                with t.cuda.graph(g):
                    fn()
                g.replay()
                t.cuda.synchronize()
                times = self.run(g.replay, reps)
                del g
                return times, "graph", ""
            except Exception as ex:  # noqa: BLE001 (report and fall back)
                t.cuda.synchronize()
                note = f"graph capture failed ({type(ex).__name__}: {str(ex).splitlines()[0][:160]}), timed by events"
                return self.run(fn, reps), "events", note
        return self.run(fn, reps), "events", ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench-json", required=True, help="fusedmoe-bench.json (its routing/ folder beside it)")
    ap.add_argument("--out", help="output JSON (default: peers.json beside the bench JSON)")
    # torch-loop-fp8 is off by default: on an H200 with PyTorch 2.11 (2026-11-21) every
    # torch._scaled_mm call of it failed with CUBLAS_STATUS_NOT_SUPPORTED; --peers can ask for it.
    ap.add_argument("--peers", default=",".join(p for p in PEERS if p != "torch-loop-fp8"))
    ap.add_argument("--presets", default="")
    ap.add_argument("--m", default="")
    ap.add_argument("--routing", default="")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--min-reps", type=int, default=10)
    ap.add_argument("--max-reps", type=int, default=200)
    ap.add_argument("--target-ms", type=float, default=100.0)
    ap.add_argument("--graph-max-m", type=int, default=256)
    ap.add_argument("--flush-mb", type=float, default=-1, help="default: max(256, 4 x L2) MiB")
    ap.add_argument("--flush-mode", choices=["read", "write"], default=None,
                    help="default: the bench JSON's method.flush_mode (write where absent: older JSONs)")
    ap.add_argument("--check-tokens", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-minutes", type=float, default=0)
    ap.add_argument("--device", default="cuda", help="cuda (default), or cpu for a smoke test of the peers' code")
    a = ap.parse_args(argv)

    with open(a.bench_json) as f:
        bench = json.load(f)
    base = os.path.dirname(os.path.abspath(a.bench_json))
    if a.flush_mode is None:
        a.flush_mode = bench.get("method", {}).get("flush_mode", "write")  # older JSONs: memset flush
    out_path = a.out or os.path.join(base, "peers.json")
    peers = [p for p in a.peers.split(",") if p]
    for p in peers:
        if p not in PEERS:
            print(f"peers.py: unknown peer {p} ({', '.join(PEERS)})", file=sys.stderr)
            return 2
    cases = select_cases(bench, peers,
                         presets=set(a.presets.split(",")) if a.presets else None,
                         ms={int(m) for m in a.m.split(",")} if a.m else None,
                         routings=set(a.routing.split(",")) if a.routing else None)
    shapes = shapes_from_bench(bench)
    try:
        t = _torch()
    except ImportError:
        print("peers.py: PyTorch is not installed", file=sys.stderr)
        return 2
    cuda = a.device != "cpu"
    if cuda and not t.cuda.is_available():
        print("peers.py: no CUDA device (--device cpu runs a smoke test)", file=sys.stderr)
        return 2
    dev = t.device("cuda" if cuda else "cpu")
    if cuda:
        props = t.cuda.get_device_properties(dev)
        dev_info = {"name": props.name, "sm_count": props.multi_processor_count,
                    "l2_bytes": getattr(props, "L2_cache_size", 50 << 20)}
    else:
        dev_info = {"name": "cpu (smoke test)", "sm_count": 0, "l2_bytes": 0}
    l2 = dev_info["l2_bytes"] or (50 << 20)
    flush_bytes = int(max(256 << 20, 4 * l2) if a.flush_mb < 0 else a.flush_mb * (1 << 20))
    timer = Timer(t, flush_bytes, a, cuda=cuda)
    have = {"_grouped_mm": hasattr(t, "_grouped_mm"), "_scaled_grouped_mm": hasattr(t, "_scaled_grouped_mm"),
            "_scaled_mm": hasattr(t, "_scaled_mm")}
    result = {
        "schema": "fusedmoe-peers/1", "torch_version": t.__version__, "cuda_version": t.version.cuda,
        "smoke_test": not cuda,
        "device": dev_info,
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join([os.path.basename(sys.argv[0])] + (argv if argv is not None else sys.argv[1:])),
        "bench_json": os.path.abspath(a.bench_json), "available": have,
        "method": {"warmup": a.warmup, "min_reps": a.min_reps, "max_reps": a.max_reps, "target_ms": a.target_ms,
                   "graph_max_m": a.graph_max_m, "flush_bytes": flush_bytes,
                   "flush_mode": a.flush_mode,
                   "check": "float32 reference on sampled tokens, activations unquantised; "
                            "tolerance bf16 2e-2, fp8 1e-1"},
        "points": [],
    }
    t0 = time.time()
    total = sum(len(c["peers"]) for c in cases)
    done = 0
    order = []
    for c in cases:
        if c["preset"] not in order:
            order.append(c["preset"])
    try:
        for preset in order:
            shape = shapes[preset]
            pc = [c for c in cases if c["preset"] == preset]
            W = None
            for phase in ("bf16", "fp8"):
                phase_peers = [p for p in peers if (PEER_FORMAT[p] == "bf16") == (phase == "bf16")]
                if not any(p in c["peers"] for c in pc for p in phase_peers):
                    continue
                try:
                    if W is None:
                        W = Shape(t, shape, a.seed, dev)
                    if phase == "fp8" and W.fp8 is None:
                        W.make_fp8()
                except Exception as ex:  # noqa: BLE001 (out of memory and the like: record and go on)
                    for c in pc:
                        for p in phase_peers:
                            if p in c["peers"]:
                                result["points"].append(dict(preset=preset, M=c["M"], routing=c["routing"], peer=p,
                                                             format=PEER_FORMAT[p], status="SKIP",
                                                             note=f"weights: {type(ex).__name__}: {ex}"[:300]))
                    continue
                for c in pc:
                    ids = np.load(os.path.join(base, c["routing_file"]))
                    wts = np.load(os.path.join(base, c["routing_weights_file"]))
                    idl = local_ids(ids, shape["E"], shape["ep"])
                    M = c["M"]
                    g = t.Generator(device=dev)
                    g.manual_seed(a.seed + M)
                    x = t.empty(M, shape["K"], dtype=t.bfloat16, device=dev).uniform_(-1, 1, generator=g)
                    valid = int((idl >= 0).sum())
                    rng = np.random.default_rng(a.seed + M)
                    rows = np.sort(rng.choice(M, size=min(M, a.check_tokens), replace=False))
                    refs = {}
                    for p in phase_peers:
                        if p not in c["peers"]:
                            continue
                        rec = dict(preset=preset, M=M, routing=c["routing"], routing_file=c["routing_file"], peer=p,
                                   format=PEER_FORMAT[p], flops=flops_of(shape, valid), valid_slots=valid,
                                   status="SKIP", note="")
                        need = {"torch-grouped-mm": "_grouped_mm", "torch-scaled-grouped-mm": "_scaled_grouped_mm",
                                "torch-loop-fp8": "_scaled_mm"}.get(p)
                        if a.max_minutes and time.time() - t0 > a.max_minutes * 60:
                            rec["note"] = "not run: --max-minutes reached"
                        elif need and not have[need]:
                            rec["note"] = f"torch.{need} is not in PyTorch {t.__version__}"
                        else:
                            try:
                                fn = build_peer(t, p, W, x, idl, wts)
                                y = fn()
                                timer._sync()
                                which = PEER_FORMAT[p] if phase == "fp8" else "bf16"
                                if which not in refs:
                                    refs[which] = reference_rows(t, W, which, x, idl, wts, rows)
                                ref = refs[which]
                                got = y[t.as_tensor(rows, device=dev)].float()
                                den = float(ref.norm())
                                err = float((got - ref).norm()) / den if den > 0 else float((got - ref).norm())
                                tol = PEER_TOL[PEER_FORMAT[p]]
                                rec["check"] = {"rel_err": err if math.isfinite(err) else None, "tol": tol,
                                                "tokens": int(len(rows))}
                                times, method, note = timer.time(fn, M)
                                rec.update(summarize(times))
                                rec["timing_method"] = method
                                rec["status"] = "OK" if math.isfinite(err) and err <= tol else "FAIL"
                                rec["note"] = note if rec["status"] == "OK" else \
                                    f"relative error {err:.3e} > {tol:g}" + (f"; {note}" if note else "")
                                if rec["median_ms"]:
                                    rec["tflops"] = rec["flops"] / (rec["median_ms"] * 1e-3) / 1e12
                                del fn, y
                            except Exception as ex:  # noqa: BLE001 (a peer that does not run is a note, not a crash)
                                rec["status"] = "ERROR"
                                rec["note"] = f"{type(ex).__name__}: {str(ex).splitlines()[0] if str(ex) else ''}"[:300]
                                try:
                                    timer._sync()
                                except Exception:  # noqa: BLE001 (a broken context: the next peer reports it)
                                    pass
                        result["points"].append(rec)
                        done += 1
                        med = rec.get("median_ms")
                        print(f"[{done}/{total} {time.time() - t0:.0f}s] {preset} {p} M={M} {c['routing']}: "
                              f"{'%.1f us' % (med * 1e3) if med else '-'} {rec['status']} {rec['note'][:120]}",
                              file=sys.stderr, flush=True)
                    del x, refs
            del W
            if cuda:
                t.cuda.empty_cache()
            write_json(out_path, result, t0)  # after every preset: a run stopped from outside keeps them
    except KeyboardInterrupt:  # stopped from outside (timeout --signal=INT): keep what is done
        result["interrupted"] = True
        print("peers.py: interrupted; writing the points done so far", file=sys.stderr)
    write_json(out_path, result, t0)
    print(f"peers: {out_path}")
    return 0


def write_json(path, result, t0):
    result["wall_s"] = time.time() - t0
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
