"""A float64 NumPy reference of the MoE expert layer (docs/SEMANTICS.md), and test helpers.

The reference takes float weights (fusedmoe.dequantize_layer gives them for any format) and does
not model activation quantisation: comparisons against quantised-activation formats use
tolerances sized for that. Bit-level agreement is checked against the library's float64 oracle
(``cpu_precision="oracle"``) instead.
"""

from __future__ import annotations

import math

import numpy as np

import fusedmoe

_erf = np.vectorize(math.erf, otypes=[np.float64])


def gate_up(h: np.ndarray, cfg: fusedmoe.LayerConfig):
    """(gate, up) halves of GEMM1's output rows h [..., 2N] for this config."""
    n = h.shape[-1] // 2
    if cfg.interleaved:
        a, b = h[..., 0::2], h[..., 1::2]
    else:
        a, b = h[..., :n], h[..., n:]
    return (a, b) if cfg.gate_up_order == "gate_up" else (b, a)


def activation(h: np.ndarray, cfg: fusedmoe.LayerConfig) -> np.ndarray:
    if cfg.activation == "relu2":
        r = np.maximum(h, 0.0)
        return r * r
    g, u = gate_up(h, cfg)
    if cfg.activation == "silu":
        return g / (1.0 + np.exp(-g)) * u
    if cfg.activation == "gelu":
        return 0.5 * g * (1.0 + _erf(g / math.sqrt(2.0))) * u
    if cfg.activation == "gelu_tanh":
        return 0.5 * g * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * g ** 3))) * u
    if cfg.activation == "swigluoai":
        lim, alpha = cfg.swiglu_limit, cfg.swiglu_alpha
        g = np.minimum(g, lim)
        u = np.clip(u, -lim, lim)
        return (u + 1.0) * g / (1.0 + np.exp(-alpha * g))
    raise ValueError(cfg.activation)


def moe_reference(x, w13, w2, topk_ids, topk_weights, cfg, w13_bias=None, w2_bias=None, expert_map=None,
                  apply_router_weight_on_input=False) -> np.ndarray:
    """out[t] = sum_k w[t,k] * (W2[e] act(W1[e] x[t] + b1[e]) + b2[e]) in float64."""
    x = np.asarray(x, np.float64)
    w13 = np.asarray(w13, np.float64)
    w2 = np.asarray(w2, np.float64)
    e_local = w13.shape[0]
    m, topk = topk_ids.shape
    out = np.zeros((m, w2.shape[1]), np.float64)
    e_global = expert_map.shape[0] if expert_map is not None else e_local
    for t in range(m):
        for k in range(topk):
            g = int(topk_ids[t, k])
            if g < 0 or g >= e_global:
                continue
            e = int(expert_map[g]) if expert_map is not None else g
            if e < 0 or e >= e_local:
                continue
            wt = float(topk_weights[t, k])
            xin = x[t] * wt if apply_router_weight_on_input else x[t]
            h = w13[e] @ xin
            if w13_bias is not None:
                h = h + w13_bias[e]
            y = w2[e] @ activation(h, cfg)
            if w2_bias is not None:
                y = y + w2_bias[e]
            out[t] += y if apply_router_weight_on_input else wt * y
    return out


def to_float(a) -> np.ndarray:
    """float32 values of an output (float32 / float16 arrays, ml_dtypes bf16, fusedmoe.Typed bf16)."""
    if isinstance(a, fusedmoe.Typed):
        return fusedmoe.decode(a.array, {"BF16": "bf16", "F16": "fp16"}[a.dtype])
    return np.asarray(a, dtype=np.float32)


def bf16(x: np.ndarray) -> fusedmoe.Typed:
    """x rounded to bf16, as raw bits tagged for fusedmoe."""
    return fusedmoe.as_dtype(fusedmoe.encode(np.ascontiguousarray(x, np.float32), "bf16"), "bf16")


def routing(m: int, e: int, topk: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    ids = np.stack([rng.permutation(e)[:topk] for _ in range(m)]).astype(np.int32)
    w = rng.random((m, topk)).astype(np.float32) + 0.1
    w /= w.sum(axis=1, keepdims=True)
    return ids, w.astype(np.float32)


def make_layer(fmt: str, e=4, k=128, n=64, act="silu", seed=1, bias=False, act_dtype="bf16", **cfg_kw):
    """(config, weights, float weights) for a random layer in ``fmt``."""
    cfg = fusedmoe.LayerConfig(format=fmt, activation=act, **cfg_kw)
    fl = fusedmoe.random_float_layer(cfg, e, k, n, seed=seed, with_bias=bias)
    extra = {}
    if fmt == "nvfp4" and act_dtype == "nvfp4":
        extra = dict(nvfp4_w13_act_amax=6.0, nvfp4_w2_act_amax=6.0)
    qcfg, w = fusedmoe.quantize_layer(cfg, fl["w13"], fl["w2"], fl.get("w13_bias"), fl.get("w2_bias"), format=fmt,
                                      act_dtype=act_dtype, **extra)
    return qcfg, w, fusedmoe.dequantize_layer(qcfg, w)
