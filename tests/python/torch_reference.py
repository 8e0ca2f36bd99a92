"""PyTorch helpers for the torch / GPU tests: fusedmoe weights as torch tensors, and a float MoE
reference in PyTorch (float64 on the CPU, float32 on a GPU)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import fusedmoe


def to_torch(weights: dict, config: fusedmoe.LayerConfig, device="cpu") -> dict:
    """NumPy weights from fusedmoe.quantize_layer as torch tensors of the contract's dtypes."""
    out = {}
    for name, arr in weights.items():
        t = torch.from_numpy(arr.copy())
        want = fusedmoe._core.contract_dtype(config.to_dict(), name)
        if want == "BF16":
            t = t.view(torch.bfloat16)
        elif want == "F8_E4M3":
            t = t.view(torch.float8_e4m3fn)
        out[name] = t.to(device)
    return out


def act(h: torch.Tensor, cfg: fusedmoe.LayerConfig) -> torch.Tensor:
    if cfg.activation == "relu2":
        return F.relu(h) ** 2
    n = h.shape[-1] // 2
    if cfg.interleaved:
        a, b = h[..., 0::2], h[..., 1::2]
    else:
        a, b = h[..., :n], h[..., n:]
    g, u = (a, b) if cfg.gate_up_order == "gate_up" else (b, a)
    if cfg.activation == "silu":
        return F.silu(g) * u
    if cfg.activation == "gelu":
        return F.gelu(g) * u
    if cfg.activation == "gelu_tanh":
        return F.gelu(g, approximate="tanh") * u
    g = g.clamp(max=cfg.swiglu_limit)
    u = u.clamp(-cfg.swiglu_limit, cfg.swiglu_limit)
    return (u + 1) * g * torch.sigmoid(cfg.swiglu_alpha * g)


def moe_reference(x, w13, w2, ids, weights, cfg, b13=None, b2=None, expert_map=None, on_input=False):
    """Float MoE layer (float64 on CPU, float32 on CUDA): sum_k w_tk * (W2 act(W1 x + b1) + b2)."""
    dt = torch.float64 if x.device.type == "cpu" else torch.float32
    x, w13, w2, weights = x.to(dt), w13.to(dt), w2.to(dt), weights.to(dt)
    out = torch.zeros(x.shape[0], w2.shape[1], dtype=dt, device=x.device)
    ids = ids.long()
    local = ids if expert_map is None else torch.where((ids >= 0) & (ids < expert_map.numel()),
                                                       expert_map.long()[ids.clamp(0, expert_map.numel() - 1)], -1)
    for e in range(w13.shape[0]):
        token, slot = torch.where(local == e)
        if token.numel() == 0:
            continue
        wt = weights[token, slot, None]
        xin = x[token] * wt if on_input else x[token]
        h = xin @ w13[e].T
        if b13 is not None:
            h = h + b13[e].to(dt)
        y = act(h, cfg) @ w2[e].T
        if b2 is not None:
            y = y + b2[e].to(dt)
        out.index_add_(0, token, y if on_input else y * wt)
    return out
