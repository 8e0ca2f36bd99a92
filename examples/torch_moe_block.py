"""Switch a PyTorch model's MoE block to fusedmoe and check that the outputs are the same.

    python examples/torch_moe_block.py                 # CUDA if available, else CPU
    python examples/torch_moe_block.py --compile       # also under torch.compile
    python examples/torch_moe_block.py --format fp8-channel   # quantised expert weights

The model below is written the way Hugging Face models write Mixtral / Qwen-MoE blocks: a router
(nn.Linear), softmax top-k routing, and one small MLP per expert (gate_proj, up_proj, down_proj),
run by a loop over the experts. ``FusedMoEBlock.from_block`` stacks the experts' weights once
(w13 = [gate; up], vLLM's order) and its forward routes with the same softmax top-k and calls
``torch.ops.fusedmoe.fused_moe``: one op for all experts, traceable by torch.compile and
capturable in CUDA graphs. ``switch_to_fusedmoe(model)`` swaps every block of a model in place.
"""

from __future__ import annotations

import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

import fusedmoe
import fusedmoe.torch_ops  # noqa: F401  (registers torch.ops.fusedmoe.*)


class Expert(nn.Module):
    def __init__(self, hidden: int, inter: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MoEBlock(nn.Module):
    """The reference: route, then loop over the experts."""

    def __init__(self, hidden: int, inter: int, num_experts: int, topk: int) -> None:
        super().__init__()
        self.topk = topk
        self.router = nn.Linear(hidden, num_experts, bias=False)
        self.experts = nn.ModuleList(Expert(hidden, inter) for _ in range(num_experts))

    def route(self, x: torch.Tensor):
        probs = F.softmax(self.router(x).float(), dim=-1)
        weights, ids = torch.topk(probs, self.topk, dim=-1)
        return weights / weights.sum(dim=-1, keepdim=True), ids

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights, ids = self.route(x)
        out = torch.zeros_like(x, dtype=torch.float32)
        for e, expert in enumerate(self.experts):
            token, slot = torch.where(ids == e)
            if token.numel():
                out.index_add_(0, token, expert(x[token]).float() * weights[token, slot, None])
        return out.to(x.dtype)


class FusedMoEBlock(nn.Module):
    """The same block on fusedmoe: stacked expert weights, one op."""

    def __init__(self, router: nn.Linear, topk: int, weights: dict, config: fusedmoe.LayerConfig) -> None:
        super().__init__()
        self.router = router
        self.topk = topk
        self.config_string = fusedmoe.torch_ops.config_string(config)
        for name, tensor in weights.items():
            self.register_buffer(name, tensor, persistent=False)
        self.weight_names = list(weights)

    @classmethod
    def from_block(cls, block: MoEBlock, format: str = "auto") -> "FusedMoEBlock":
        w13 = torch.stack([torch.cat([e.gate_proj.weight, e.up_proj.weight]) for e in block.experts]).detach()
        w2 = torch.stack([e.down_proj.weight for e in block.experts]).detach()
        if format == "auto":
            format = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}[w13.dtype]
        config = fusedmoe.LayerConfig(format)
        if format in ("bf16", "fp16", "fp32"):
            weights = {"w13_weight": w13.contiguous(), "w2_weight": w2.contiguous()}
        else:
            # Quantise once on the CPU with fusedmoe's encoders, then move to the block's device.
            config, q = fusedmoe.quantize_layer(config, w13.float().cpu(), w2.float().cpu(), format=format)
            weights = {name: _to_torch(arr, config, name).to(w13.device) for name, arr in q.items()}
        return cls(block.router, block.topk, weights, config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probs = F.softmax(self.router(x).float(), dim=-1)
        weights, ids = torch.topk(probs, self.topk, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        w = {name: getattr(self, name) for name in self.weight_names}
        return torch.ops.fusedmoe.fused_moe(
            x, ids.to(torch.int32), weights, w["w13_weight"], w["w2_weight"],
            w.get("w13_weight_scale"), w.get("w2_weight_scale"), w.get("w13_weight_scale_2"),
            w.get("w2_weight_scale_2"), w.get("w13_input_scale"), w.get("w2_input_scale"), None, None, None,
            self.config_string, False)


def _to_torch(arr, config, name) -> torch.Tensor:
    """A NumPy weight from fusedmoe.quantize_layer as a torch tensor of the contract's dtype."""
    t = torch.from_numpy(arr)
    want = fusedmoe._core.contract_dtype(config.to_dict(), name)
    if want == "BF16":
        return t.view(torch.bfloat16)
    if want == "F8_E4M3":
        return t.view(torch.float8_e4m3fn)
    return t


def switch_to_fusedmoe(model: nn.Module, format: str = "auto") -> nn.Module:
    """Replaces every MoEBlock of ``model`` with a FusedMoEBlock (in place)."""
    for name, child in list(model.named_children()):
        if isinstance(child, MoEBlock):
            setattr(model, name, FusedMoEBlock.from_block(child, format))
        else:
            switch_to_fusedmoe(child, format)
    return model


class TinyModel(nn.Module):
    def __init__(self, hidden=256, inter=512, num_experts=8, topk=2, layers=2) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.ModuleDict({"norm": nn.LayerNorm(hidden), "moe": MoEBlock(hidden, inter, num_experts, topk)})
                                    for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = x + layer["moe"](layer["norm"](x))
        return x


def main(argv=None) -> float:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() and fusedmoe.cuda_available() else "cpu")
    p.add_argument("--dtype", default=None, help="bfloat16 (default on CUDA) or float32 (default on CPU)")
    p.add_argument("--format", default="auto", help="fusedmoe weight format (default: the model's dtype)")
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--compile", action="store_true", help="also run the switched model under torch.compile")
    args = p.parse_args(argv)
    dtype = getattr(torch, args.dtype) if args.dtype else (torch.bfloat16 if args.device == "cuda" else torch.float32)

    torch.manual_seed(0)
    model = TinyModel().to(args.device, dtype).eval()
    x = torch.randn(args.tokens, 256, device=args.device, dtype=dtype)
    with torch.no_grad():
        ref = model(x).float()
        switch_to_fusedmoe(model, args.format)
        out = model(x).float()
        runs = [("eager", out)]
        if args.compile:
            runs.append(("compiled", torch.compile(model, fullgraph=True)(x).float()))
    scale = ref.abs().max().item()
    # bf16 models round every expert's output (reference) vs fp32 accumulation (fusedmoe); quantised
    # formats add their weight quantisation error.
    tol = (1e-4 if dtype == torch.float32 else 2e-2) if args.format in ("auto", "bf16", "fp16", "fp32") else 6e-2
    worst = 0.0
    for name, o in runs:
        err = (o - ref).abs().max().item() / scale
        worst = max(worst, err)
        print("%-8s device=%s dtype=%s format=%s: max |fusedmoe - reference| / max |reference| = %.2e (tolerance %.0e)"
              % (name, args.device, str(dtype).replace("torch.", ""), args.format, err, tol))
    if worst > tol:
        print("FAILED: outputs differ beyond the tolerance", file=sys.stderr)
        raise SystemExit(1)
    return worst


if __name__ == "__main__":
    main()
