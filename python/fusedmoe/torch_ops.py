"""``torch.ops.fusedmoe.fused_moe``: the layer as a PyTorch custom op (torch.library), with a
fake (meta) implementation, so that it works under ``torch.compile`` and in CUDA graphs.

Registered when this module is imported (``import fusedmoe`` does it when PyTorch is installed;
needs torch >= 2.4 for ``torch.library.custom_op``). Two ops:

* ``fusedmoe::fused_moe(hidden_states, topk_ids, topk_weights, w13_weight, w2_weight,
  w13_weight_scale?, w2_weight_scale?, w13_weight_scale_2?, w2_weight_scale_2?, w13_input_scale?,
  w2_input_scale?, w13_bias?, w2_bias?, expert_map?, config: str,
  apply_router_weight_on_input: bool) -> Tensor`` (a new [M, K] tensor);
* ``fusedmoe::fused_moe_out(output!, ...)``: the same, writing ``output`` in place.

``config`` is :func:`config_string` of a :class:`fusedmoe.LayerConfig` (e.g. ``"format=bf16"``).
The op runs on the current CUDA stream of the tensors' device and allocates its workspace with
``torch.empty`` on that device (the caching allocator: graph-safe); the layer itself never
allocates or synchronises. The layer for a weight set is built on the op's first call with it and
cached: make that first call (or :meth:`fusedmoe.MoELayer.warmup`) before capturing a graph.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Optional, Union

import torch

from ._layer import LayerConfig, cached_layer

__all__ = ["available", "config_string", "fused_moe", "fused_moe_out"]

#: Whether the ops are registered (torch >= 2.4).
available: bool = hasattr(torch, "library") and hasattr(torch.library, "custom_op")


def config_string(config: Union[LayerConfig, str]) -> str:
    """The op's ``config`` argument for a LayerConfig (fields that differ from the defaults)."""
    if isinstance(config, str):
        return config if "=" in config else "format=" + config
    parts = ["format=" + str(config.format)]
    for name, default in _DEFAULTS:  # (no dataclasses.fields here: torch.compile traces this)
        value = getattr(config, name)
        if value != default:
            parts.append(name + "=" + str(value))
    return ",".join(parts)


_DEFAULTS = tuple((f.name, f.default) for f in dataclasses.fields(LayerConfig) if f.name != "format")


@functools.lru_cache(maxsize=1024)
def _parse_config(text: str) -> LayerConfig:
    fields = {f.name: f for f in dataclasses.fields(LayerConfig)}
    kwargs = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = item.partition("=")
        key = key.strip()
        if key not in fields:
            from ._errors import invalid_argument  # noqa: PLC0415

            raise invalid_argument("config", "key=value pairs of LayerConfig fields (%s)" % ", ".join(fields), repr(key))
        value = value.strip()
        default = fields[key].default
        if isinstance(default, bool):
            kwargs[key] = value.lower() in ("1", "true", "yes")
        elif isinstance(default, float):
            kwargs[key] = float(value)
        else:
            kwargs[key] = value
    return LayerConfig(**kwargs)


def _run(output: Optional[torch.Tensor], hidden_states, topk_ids, topk_weights, w13_weight, w2_weight,
         w13_weight_scale, w2_weight_scale, w13_weight_scale_2, w2_weight_scale_2, w13_input_scale, w2_input_scale,
         w13_bias, w2_bias, expert_map, config, apply_router_weight_on_input) -> torch.Tensor:
    cfg = _parse_config(config)
    weights = dict(w13_weight=w13_weight, w2_weight=w2_weight, w13_weight_scale=w13_weight_scale,
                   w2_weight_scale=w2_weight_scale, w13_weight_scale_2=w13_weight_scale_2,
                   w2_weight_scale_2=w2_weight_scale_2, w13_input_scale=w13_input_scale,
                   w2_input_scale=w2_input_scale, w13_bias=w13_bias, w2_bias=w2_bias)
    layer = cached_layer(cfg, weights)
    if output is None:
        output = torch.empty(hidden_states.shape, dtype=hidden_states.dtype, device=hidden_states.device)
    layer(hidden_states, topk_ids, topk_weights, expert_map=expert_map,
          apply_router_weight_on_input=apply_router_weight_on_input, output=output)
    return output


if available:

    @torch.library.custom_op("fusedmoe::fused_moe", mutates_args=())
    def _fused_moe_op(
        hidden_states: torch.Tensor,
        topk_ids: torch.Tensor,
        topk_weights: torch.Tensor,
        w13_weight: torch.Tensor,
        w2_weight: torch.Tensor,
        w13_weight_scale: Optional[torch.Tensor],
        w2_weight_scale: Optional[torch.Tensor],
        w13_weight_scale_2: Optional[torch.Tensor],
        w2_weight_scale_2: Optional[torch.Tensor],
        w13_input_scale: Optional[torch.Tensor],
        w2_input_scale: Optional[torch.Tensor],
        w13_bias: Optional[torch.Tensor],
        w2_bias: Optional[torch.Tensor],
        expert_map: Optional[torch.Tensor],
        config: str,
        apply_router_weight_on_input: bool,
    ) -> torch.Tensor:
        return _run(None, hidden_states, topk_ids, topk_weights, w13_weight, w2_weight, w13_weight_scale,
                    w2_weight_scale, w13_weight_scale_2, w2_weight_scale_2, w13_input_scale, w2_input_scale,
                    w13_bias, w2_bias, expert_map, config, apply_router_weight_on_input)

    @_fused_moe_op.register_fake
    def _fused_moe_fake(hidden_states, topk_ids, topk_weights, w13_weight, w2_weight, w13_weight_scale,
                        w2_weight_scale, w13_weight_scale_2, w2_weight_scale_2, w13_input_scale, w2_input_scale,
                        w13_bias, w2_bias, expert_map, config, apply_router_weight_on_input):
        return hidden_states.new_empty(hidden_states.shape)

    @torch.library.custom_op("fusedmoe::fused_moe_out", mutates_args=("output",))
    def _fused_moe_out_op(
        output: torch.Tensor,
        hidden_states: torch.Tensor,
        topk_ids: torch.Tensor,
        topk_weights: torch.Tensor,
        w13_weight: torch.Tensor,
        w2_weight: torch.Tensor,
        w13_weight_scale: Optional[torch.Tensor],
        w2_weight_scale: Optional[torch.Tensor],
        w13_weight_scale_2: Optional[torch.Tensor],
        w2_weight_scale_2: Optional[torch.Tensor],
        w13_input_scale: Optional[torch.Tensor],
        w2_input_scale: Optional[torch.Tensor],
        w13_bias: Optional[torch.Tensor],
        w2_bias: Optional[torch.Tensor],
        expert_map: Optional[torch.Tensor],
        config: str,
        apply_router_weight_on_input: bool,
    ) -> None:
        _run(output, hidden_states, topk_ids, topk_weights, w13_weight, w2_weight, w13_weight_scale, w2_weight_scale,
             w13_weight_scale_2, w2_weight_scale_2, w13_input_scale, w2_input_scale, w13_bias, w2_bias, expert_map,
             config, apply_router_weight_on_input)

    @_fused_moe_out_op.register_fake
    def _fused_moe_out_fake(output, hidden_states, topk_ids, topk_weights, w13_weight, w2_weight, w13_weight_scale,
                            w2_weight_scale, w13_weight_scale_2, w2_weight_scale_2, w13_input_scale, w2_input_scale,
                            w13_bias, w2_bias, expert_map, config, apply_router_weight_on_input):
        return None


def _weights_args(w13_weight, w2_weight, kw):
    names = ("w13_weight_scale", "w2_weight_scale", "w13_weight_scale_2", "w2_weight_scale_2", "w13_input_scale",
             "w2_input_scale", "w13_bias", "w2_bias")
    unknown = set(kw) - set(names)
    if unknown:
        raise TypeError("unexpected keyword argument %r" % sorted(unknown)[0])
    return (w13_weight, w2_weight) + tuple(kw.get(n) for n in names)


def fused_moe(
    hidden_states: torch.Tensor,
    w13_weight: torch.Tensor,
    w2_weight: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    config: Union[LayerConfig, str] = "bf16",
    *,
    expert_map: Optional[torch.Tensor] = None,
    apply_router_weight_on_input: bool = False,
    **weights: Optional[torch.Tensor],
) -> torch.Tensor:
    """``torch.ops.fusedmoe.fused_moe`` with keyword weights (``w13_weight_scale=...`` etc.) and
    a LayerConfig or format name; traceable by ``torch.compile``, capturable in CUDA graphs."""
    if not available:
        raise RuntimeError("fusedmoe.torch_ops needs torch >= 2.4 (torch.library.custom_op)")
    return torch.ops.fusedmoe.fused_moe(hidden_states, topk_ids, topk_weights,
                                        *_weights_args(w13_weight, w2_weight, weights), expert_map,
                                        config_string(config), bool(apply_router_weight_on_input))


def fused_moe_out(
    output: torch.Tensor,
    hidden_states: torch.Tensor,
    w13_weight: torch.Tensor,
    w2_weight: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    config: Union[LayerConfig, str] = "bf16",
    *,
    expert_map: Optional[torch.Tensor] = None,
    apply_router_weight_on_input: bool = False,
    **weights: Optional[torch.Tensor],
) -> torch.Tensor:
    """``torch.ops.fusedmoe.fused_moe_out``: :func:`fused_moe` writing ``output`` in place."""
    if not available:
        raise RuntimeError("fusedmoe.torch_ops needs torch >= 2.4 (torch.library.custom_op)")
    torch.ops.fusedmoe.fused_moe_out(output, hidden_states, topk_ids, topk_weights,
                                     *_weights_args(w13_weight, w2_weight, weights), expert_map,
                                     config_string(config), bool(apply_router_weight_on_input))
    return output
