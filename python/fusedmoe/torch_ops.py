"""``torch.ops.fusedmoe.fused_moe``: the layer as a PyTorch custom op (torch.library), with a
fake (meta) implementation, so that it works under ``torch.compile`` and in CUDA graphs.

Registered when this module is imported (``import fusedmoe`` does it when PyTorch is installed;
needs torch >= 2.4 for ``torch.library.custom_op``). Two ops:

* ``fusedmoe::fused_moe(hidden_states, topk_ids, topk_weights, w13_weight, w2_weight,
  w13_weight_scale?, w2_weight_scale?, w13_weight_scale_2?, w2_weight_scale_2?, w13_input_scale?,
  w2_input_scale?, w13_bias?, w2_bias?, expert_map?, config: str,
  apply_router_weight_on_input: bool) -> Tensor`` (a new [M, K] tensor);
* ``fusedmoe::fused_moe_out(output!, ...)``: the same, writing ``output`` in place;
* ``fusedmoe::fused_moe_masked(hidden_states, expert_num_tokens, w13_weight, w2_weight,
  w13_weight_scale?, ..., w2_bias?, hidden_states_scale?, config: str, out_dtype: str) -> Tensor``:
  the batched / masked layout (:meth:`fusedmoe.MoELayer.run_masked`): [E, T, K] rows grouped by
  expert, ``expert_num_tokens`` [E] int32 valid rows each (read on the device); ``out_dtype`` is
  ``""`` (the dtype of ``hidden_states``) or ``bf16`` / ``fp16`` / ``fp32`` (required with
  pre-quantised float8 ``hidden_states`` + ``hidden_states_scale``, fp8-block only).

Pre-quantised inputs of the contiguous layout (``MoELayer.__call__(..., hidden_states_scale=)``)
are not an op yet: ``fused_moe`` / ``fused_moe_out`` take unquantised ``hidden_states``.

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

from ._layer import WEIGHT_NAMES, LayerConfig, cached_layer

__all__ = ["available", "config_string", "fused_moe", "fused_moe_out", "fused_moe_masked"]

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


def _cached(cfg: LayerConfig, *weights):
    """The cached layer of these weight tensors, given in WEIGHT_NAMES order (the ops' schema order)."""
    return cached_layer(cfg, dict(zip(WEIGHT_NAMES, weights)))


def _run(output: Optional[torch.Tensor], hidden_states, topk_ids, topk_weights, w13_weight, w2_weight,
         w13_weight_scale, w2_weight_scale, w13_weight_scale_2, w2_weight_scale_2, w13_input_scale, w2_input_scale,
         w13_bias, w2_bias, expert_map, config, apply_router_weight_on_input) -> torch.Tensor:
    cfg = _parse_config(config)
    layer = _cached(cfg, w13_weight, w2_weight, w13_weight_scale, w2_weight_scale, w13_weight_scale_2,
                    w2_weight_scale_2, w13_input_scale, w2_input_scale, w13_bias, w2_bias)
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


_OUT_DTYPES = {"": None, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16,
               "float16": torch.float16, "half": torch.float16, "fp32": torch.float32, "float32": torch.float32,
               "float": torch.float32}


def _masked_out_dtype(hidden_states: torch.Tensor, out_dtype: str) -> torch.dtype:
    key = out_dtype.lower().replace("torch.", "")
    if key not in _OUT_DTYPES:
        from ._errors import invalid_argument  # noqa: PLC0415

        raise invalid_argument("out_dtype", "'' (the dtype of hidden_states), bf16, fp16 or fp32", repr(out_dtype))
    dt = _OUT_DTYPES[key]
    if dt is None:
        if hidden_states.dtype not in (torch.bfloat16, torch.float16, torch.float32):
            from ._errors import invalid_argument  # noqa: PLC0415

            raise invalid_argument("out_dtype", "bf16, fp16 or fp32 with pre-quantised float8 hidden_states", "''")
        return hidden_states.dtype
    return dt


def _run_masked(hidden_states, expert_num_tokens, w13_weight, w2_weight, w13_weight_scale, w2_weight_scale,
                w13_weight_scale_2, w2_weight_scale_2, w13_input_scale, w2_input_scale, w13_bias, w2_bias,
                hidden_states_scale, config, out_dtype) -> torch.Tensor:
    cfg = _parse_config(config)
    layer = _cached(cfg, w13_weight, w2_weight, w13_weight_scale, w2_weight_scale, w13_weight_scale_2,
                    w2_weight_scale_2, w13_input_scale, w2_input_scale, w13_bias, w2_bias)
    output = torch.empty(hidden_states.shape, dtype=_masked_out_dtype(hidden_states, out_dtype),
                         device=hidden_states.device)
    layer.run_masked(hidden_states, expert_num_tokens, output=output, hidden_states_scale=hidden_states_scale)
    return output


if available:

    @torch.library.custom_op("fusedmoe::fused_moe_masked", mutates_args=())
    def _fused_moe_masked_op(
        hidden_states: torch.Tensor,
        expert_num_tokens: torch.Tensor,
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
        hidden_states_scale: Optional[torch.Tensor],
        config: str,
        out_dtype: str,
    ) -> torch.Tensor:
        return _run_masked(hidden_states, expert_num_tokens, w13_weight, w2_weight, w13_weight_scale, w2_weight_scale,
                           w13_weight_scale_2, w2_weight_scale_2, w13_input_scale, w2_input_scale, w13_bias, w2_bias,
                           hidden_states_scale, config, out_dtype)

    @_fused_moe_masked_op.register_fake
    def _fused_moe_masked_fake(hidden_states, expert_num_tokens, w13_weight, w2_weight, w13_weight_scale,
                               w2_weight_scale, w13_weight_scale_2, w2_weight_scale_2, w13_input_scale, w2_input_scale,
                               w13_bias, w2_bias, hidden_states_scale, config, out_dtype):
        return hidden_states.new_empty(hidden_states.shape, dtype=_masked_out_dtype(hidden_states, out_dtype))


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


def fused_moe_masked(
    hidden_states: torch.Tensor,
    expert_num_tokens: torch.Tensor,
    w13_weight: torch.Tensor,
    w2_weight: torch.Tensor,
    config: Union[LayerConfig, str] = "bf16",
    *,
    hidden_states_scale: Optional[torch.Tensor] = None,
    out_dtype: Optional[Union[torch.dtype, str]] = None,
    **weights: Optional[torch.Tensor],
) -> torch.Tensor:
    """``torch.ops.fusedmoe.fused_moe_masked``: the batched / masked layout ([E, T, K] rows with
    ``expert_num_tokens`` [E] int32 valid rows per expert; rows past the count come back as zeros),
    with keyword weights; traceable by ``torch.compile``, capturable in CUDA graphs. ``out_dtype``
    (a torch dtype or name) is required with pre-quantised float8 ``hidden_states``."""
    if not available:
        raise RuntimeError("fusedmoe.torch_ops needs torch >= 2.4 (torch.library.custom_op)")
    if isinstance(out_dtype, torch.dtype):
        out_dtype = str(out_dtype).replace("torch.", "")
    return torch.ops.fusedmoe.fused_moe_masked(hidden_states, expert_num_tokens,
                                               *_weights_args(w13_weight, w2_weight, weights), hidden_states_scale,
                                               config_string(config), out_dtype or "")
