"""Drop-in replacements for vLLM's and FlashInfer's fused-MoE functions.

Same names, argument names, shapes and dtypes as the originals (see /shared/reference); an engine
switches by changing an import::

    # from flashinfer.fused_moe import cutlass_fused_moe
    from fusedmoe.seeds import cutlass_fused_moe

Every function runs on the tensors' own device (CPU tensors on the CPU backend, CUDA tensors on
the CUDA backend, on the current stream). A format the backend cannot run raises
:class:`fusedmoe.Unsupported` with the backend's reason; nothing falls back silently. Where a
drop-in differs from its original, its docstring says so (section "Differences").

Each call looks up a cached :class:`fusedmoe.MoELayer` keyed by the weight and scale tensors'
memory; the first call with a weight set validates it and derives fusedmoe's scales from the
seed's (small [E] tensor operations with the tensors' framework), so make that first call (a
warm-up) before capturing a CUDA graph. After changing weights or scales in place call
:func:`fusedmoe.clear_layer_cache`.
"""

from __future__ import annotations

import warnings
from typing import Any, List, Optional, Sequence, Tuple

from . import _arrays
from . import _tensor_math as tm
from ._errors import invalid_argument, unsupported
from ._layer import LayerConfig, MoELayer, get_layer
from ._ops import swizzled_shape

__all__ = [
    "cutlass_fused_moe",
    "cutlass_moe_fp8",
    "cutlass_moe_w4a8_fp8",
    "run_cutlass_moe_fp4",
    "run_cutlass_moe_mxfp4",
    "swizzle_mxfp4_scales",
    "deep_gemm_moe_fp8",
    "FusedMoEQuantConfig",
    "vllm_activation",
    "flashinfer_activation",
]


# ---------------------------------------------------------------------------------------------
# Helpers

class FusedMoEQuantConfig:
    """A stand-in for vLLM's ``FusedMoEQuantConfig`` with the attributes the drop-ins read
    (any object with these attributes works, vLLM's own included)."""

    def __init__(self, *, quant_dtype: Any = None, per_act_token_quant: bool = False, per_out_ch_quant: bool = False,
                 block_shape: Optional[Sequence[int]] = None, w1_scale: Any = None, w2_scale: Any = None,
                 a1_scale: Any = None, a2_scale: Any = None, g1_alphas: Any = None, g2_alphas: Any = None,
                 a1_gscale: Any = None, a2_gscale: Any = None, w1_bias: Any = None, w2_bias: Any = None,
                 w1_zp: Any = None, w2_zp: Any = None) -> None:
        self.quant_dtype = quant_dtype
        self.per_act_token_quant = per_act_token_quant
        self.per_out_ch_quant = per_out_ch_quant
        self.block_shape = list(block_shape) if block_shape is not None else None
        self.w1_scale, self.w2_scale = w1_scale, w2_scale
        self.a1_scale, self.a2_scale = a1_scale, a2_scale
        self.g1_alphas, self.g2_alphas = g1_alphas, g2_alphas
        self.a1_gscale, self.a2_gscale = a1_gscale, a2_gscale
        self.w1_bias, self.w2_bias = w1_bias, w2_bias
        self.w1_zp, self.w2_zp = w1_zp, w2_zp

    @property
    def is_block_quantized(self) -> bool:
        return self.block_shape is not None


def _qc(quant_config: Any, name: str) -> Any:
    return getattr(quant_config, name, None) if quant_config is not None else None


def _activation_name(activation: Any) -> str:
    """A lower-case name from a string, an enum (vLLM MoEActivation, FlashInfer ActivationType)."""
    if isinstance(activation, str):
        return activation.lower()
    value = getattr(activation, "value", None)
    if isinstance(value, str):
        return value.lower()
    name = getattr(activation, "name", None)
    if isinstance(name, str):
        return name.lower()
    return str(activation).lower()


def vllm_activation(activation: Any) -> dict:
    """LayerConfig fields for a vLLM activation (``silu``, ``gelu``, ``gelu_tanh``,
    ``swigluoai`` (gate/up interleaved, as vLLM's kernel takes it), ``relu2_no_mul``), with
    vLLM's gate/up order ([gate; up])."""
    name = _activation_name(activation)
    table = {
        "silu": dict(activation="silu"),
        "gelu": dict(activation="gelu"),
        "gelu_tanh": dict(activation="gelu_tanh"),
        "swigluoai": dict(activation="swigluoai", interleaved=True),
        "relu2_no_mul": dict(activation="relu2"),
        "relu2": dict(activation="relu2"),
    }
    if name not in table:
        raise unsupported("activation '%s': fusedmoe runs silu, gelu, gelu_tanh, swigluoai (gated) and "
                          "relu2_no_mul" % name)
    cfg = dict(gate_up_order="gate_up")
    cfg.update(table[name])
    return cfg


# FlashInfer / TensorRT-LLM ActivationType values (used only when a plain int is passed).
_FI_ACTIVATION_INTS = {0: "gelu", 1: "relu", 2: "silu", 3: "swiglu", 4: "geglu", 5: "swiglubias", 6: "relu2",
                       7: "identity"}


def flashinfer_activation(activation_type: Any) -> dict:
    """LayerConfig fields for a FlashInfer ``ActivationType`` (``Swiglu`` default, ``SwigluBias``
    (gpt-oss), ``Relu2``), with FlashInfer's order: fc1 = [up; gate]."""
    if activation_type is None:
        name = "swiglu"
    elif isinstance(activation_type, int) and not hasattr(activation_type, "name"):
        name = _FI_ACTIVATION_INTS.get(int(activation_type), str(activation_type))
    else:
        name = _activation_name(activation_type)
    if name == "swiglu":
        return dict(activation="silu", gate_up_order="up_gate")
    if name == "swiglubias":
        return dict(activation="swigluoai", gate_up_order="up_gate", interleaved=False)
    if name == "relu2":
        return dict(activation="relu2", gate_up_order="up_gate")
    if name == "geglu":
        raise unsupported("activation_type Geglu: which GELU form (erf or tanh) FlashInfer uses is not pinned "
                          "down; use fusedmoe.MoELayer with activation='gelu' or 'gelu_tanh' and "
                          "gate_up_order='up_gate'")
    raise unsupported("activation_type %s: fusedmoe runs Swiglu, SwigluBias and Relu2 for FlashInfer's API "
                      "(non-gated gelu / relu / silu / identity are not layer activations here)" % name)


def _key(*tensors: Any) -> Tuple:
    return tuple(None if t is None else _arrays.identity(t) for t in tensors)


def _layer(tag: str, key: Tuple, build, refs: Sequence[Any]) -> MoELayer:
    return get_layer((tag,) + key, build, refs=[r for r in refs if r is not None])


def _workspace_from(layer: MoELayer, m: int, topk: int, *candidates: Any) -> Any:
    """A caller-provided buffer large enough for the layer's workspace, or None (allocate)."""
    need = layer.workspace_size(m, topk)
    if need == 0:
        return None
    for ws in candidates:
        if ws is None:
            continue
        nbytes = _arrays.numel(ws) * _arrays._ITEMSIZE.get(_arrays.dtype_name(ws) or "U8", 1)
        if nbytes >= need and tm.is_contiguous(ws) and _arrays.device(ws) == layer.device:
            return ws
    return None


def _check_topk(topk_ids: Any, topk_weights: Any, m: int) -> int:
    ishape = _arrays.shape(topk_ids)
    if len(ishape) != 2 or ishape[0] != m:
        raise invalid_argument("topk_ids", "shape [%d,topk]" % m, list(ishape))
    if tuple(_arrays.shape(topk_weights)) != tuple(ishape):
        raise invalid_argument("topk_weights", "shape %s" % list(ishape), list(_arrays.shape(topk_weights)))
    return ishape[1]


# ---------------------------------------------------------------------------------------------
# FlashInfer

def cutlass_fused_moe(
    input: Any,
    token_selected_experts: Any,
    token_final_scales: Any,
    fc1_expert_weights: Any,
    fc2_expert_weights: Any,
    output_dtype: Any,
    quant_scales: Optional[List[Any]],
    fc1_expert_biases: Any = None,
    fc2_expert_biases: Any = None,
    input_sf: Any = None,
    tp_size: int = 1,
    tp_rank: int = 0,
    ep_size: int = 1,
    ep_rank: int = 0,
    cluster_size: int = 1,
    cluster_rank: int = 0,
    output: Any = None,
    enable_alltoall: bool = False,
    use_deepseek_fp8_block_scale: bool = False,
    use_w4a8_group_scaling: bool = False,
    use_mxfp8_act_scaling: bool = False,
    min_latency_mode: bool = False,
    tune_max_num_tokens: int = 8192,
    *,
    activation_type: Any = None,
    swiglu_alpha: Any = None,
    swiglu_beta: Any = None,
    swiglu_limit: Any = None,
    enable_pdl: Optional[bool] = None,
    stream: Optional[int] = None,
) -> Any:
    """FlashInfer's ``flashinfer.fused_moe.cutlass_fused_moe`` on fusedmoe.

    fc1 holds [up; gate] (FlashInfer's order; the *second* half is the gate). Formats, chosen as
    FlashInfer chooses them:

    * unquantised (fc1 float32 / float16 / bfloat16, ``quant_scales`` empty or None);
    * FP8 per-tensor (fc1 float8_e4m3fn): ``quant_scales`` = [fc1 dequant [E] (= w1_scale *
      a1_scale), fc2 activation quant (= 1 / a2_scale), fc2 dequant [E] (= w2_scale * a2_scale),
      fc1 input dequant (= a1_scale)]; ``input`` fp8 (quantised with a1_scale) or unquantised;
    * FP8 128x128 blocks (``use_deepseek_fp8_block_scale=True``): ``quant_scales`` = [w1 block
      scales [E, 2N/128, K/128], w2 block scales]; ``input`` unquantised (bf16);
    * NVFP4 (fc1 packed uint8, or its int64 view [E, 2N, K/16]): ``quant_scales`` = [a1_gscale
      (fc1 activation global encode scale), fc1 block scales (e4m3, 128x4-swizzled, or their
      int32 view), g1_alphas [E] (= 1 / (a1_gscale * w1_global_scale)), a2_gscale, fc2 block
      scales, g2_alphas]; ``input`` bf16 / fp16 (quantised to NVFP4 inside, W4A4) or packed
      NVFP4 uint8 [M, K/2] with ``input_sf`` (its block scales, swizzled or linear).

    ``ep_size`` / ``ep_rank``: this rank holds experts [ep_rank * E, (ep_rank + 1) * E) of
    ``ep_size * E`` global ones. ``activation_type``: FlashInfer's ``ActivationType``
    (``Swiglu``, ``SwigluBias`` with ``swiglu_alpha`` / ``swiglu_limit``, ``Relu2``) or its name.

    Returns ``output`` ([M, K] of ``output_dtype``).

    Differences:
        * Pre-quantised inputs (fp8, NVFP4) are dequantised to ``output_dtype`` and quantised again
          by the layer with the same scales: exact for fp8, and for NVFP4 blocks made by the standard
          recipe (sf = e4m3(gs * amax / 6)).
        * The output is computed in the input's dtype (the dequantised input's for quantised inputs)
          and converted when ``output_dtype`` differs (a copy).
        * The top-k sum is deterministic (fixed order, fp32), unlike FlashInfer's atomics.
        * Not supported (raise :class:`fusedmoe.Unsupported`): ``use_w4a8_group_scaling``,
          ``use_mxfp8_act_scaling``, ``min_latency_mode``, ``enable_alltoall``, ``cluster_size > 1``,
          fc2 biases with ``tp_size > 1``, per-expert SwigluBias alpha / limit values that differ,
          ``swiglu_beta != 1``, activation ``Geglu``.
        * ``tune_max_num_tokens`` and ``enable_pdl`` are accepted and ignored. ``stream`` (keyword,
          fusedmoe's) overrides the current stream.
    """
    if min_latency_mode:
        raise unsupported("cutlass_fused_moe: min_latency_mode is not supported by fusedmoe")
    if enable_alltoall:
        raise unsupported("cutlass_fused_moe: enable_alltoall is not supported by fusedmoe (do the all-to-all outside)")
    if use_w4a8_group_scaling:
        raise unsupported("cutlass_fused_moe: use_w4a8_group_scaling (FlashInfer's W4A8 scale list) is not supported; "
                          "use fusedmoe.seeds.cutlass_moe_w4a8_fp8 or MoELayer(format='w4a8-int4')")
    if use_mxfp8_act_scaling:
        raise unsupported("cutlass_fused_moe: use_mxfp8_act_scaling (MXFP8 activations) is not a fusedmoe format; "
                          "MoELayer(format='mxfp4', act_dtype='bf16' or 'fp8') runs MXFP4 weights")
    if cluster_size != 1:
        raise unsupported("cutlass_fused_moe: cluster_size > 1 is not supported by fusedmoe")
    if tp_size > 1 and fc2_expert_biases is not None:
        raise unsupported("cutlass_fused_moe: fc2 biases with tp_size > 1 (which rank adds the bias is not defined "
                          "here); add the bias after the all-reduce")

    act = flashinfer_activation(activation_type)
    if act["activation"] == "swigluoai":
        for name, value in (("swiglu_alpha", swiglu_alpha), ("swiglu_limit", swiglu_limit), ("swiglu_beta", swiglu_beta)):
            vals = set(tm.host_floats(value))
            if len(vals) > 1:
                raise unsupported("cutlass_fused_moe: per-expert %s values that differ (%s); fusedmoe takes one value"
                                  % (name, sorted(vals)[:4]))
            if vals and name == "swiglu_beta" and vals != {1.0}:
                raise unsupported("cutlass_fused_moe: swiglu_beta %s (fusedmoe's swigluoai has beta = 1)" % vals)
            if vals and name != "swiglu_beta":
                act[name] = next(iter(vals))

    in_dtype = _arrays.dtype_name(input)
    w_dtype = _arrays.dtype_name(fc1_expert_weights)
    scales = list(quant_scales) if quant_scales is not None else []
    m = _arrays.shape(input)[0]
    topk = _check_topk(token_selected_experts, token_final_scales, m)
    local_e = _arrays.shape(fc1_expert_weights)[0]
    out_name = tm.dtype_from_any(output_dtype) or in_dtype
    if out_name not in ("F32", "F16", "BF16"):
        raise invalid_argument("output_dtype", "float32, float16 or bfloat16", output_dtype)

    if use_deepseek_fp8_block_scale:
        if len(scales) != 2:
            raise invalid_argument("quant_scales", "[fc1 block scales, fc2 block scales] with use_deepseek_fp8_block_scale",
                                   "%d tensors" % len(scales))
        if in_dtype not in ("F32", "F16", "BF16"):
            raise unsupported("cutlass_fused_moe: pre-quantised fp8 input with use_deepseek_fp8_block_scale; pass the "
                              "unquantised (bf16) input: fusedmoe quantises it per token and group of 128")
        cfg = LayerConfig(format="fp8-block", **act)
        weights = dict(w13_weight=fc1_expert_weights, w2_weight=fc2_expert_weights, w13_weight_scale=scales[0],
                       w2_weight_scale=scales[1], w13_bias=fc1_expert_biases, w2_bias=fc2_expert_biases)
        key = _key(fc1_expert_weights, fc2_expert_weights, *scales, fc1_expert_biases, fc2_expert_biases)
        layer = _layer("fi-fp8-block", key + (cfg,), lambda: MoELayer(cfg, weights), list(weights.values()))
        x = input
    elif w_dtype == "F8_E4M3" or (w_dtype == "U8" and len(scales) == 4):
        if w_dtype == "U8":  # raw fp8 bits (NumPy)
            fc1_expert_weights = _arrays.Typed(fc1_expert_weights, "F8_E4M3")
            fc2_expert_weights = _arrays.Typed(fc2_expert_weights, "F8_E4M3")
        if len(scales) != 4:
            raise invalid_argument("quant_scales", "[fc1 dequant, fc2 act quant, fc2 dequant, fc1 input dequant] (FP8)",
                                   "%d tensors" % len(scales))
        fc1_dequant, fc2_act_quant, fc2_dequant, fc1_in_dequant = scales
        cfg = LayerConfig(format="fp8-tensor", **act)

        def build_fp8() -> MoELayer:
            a1 = tm.scalar1(fc1_in_dequant, "quant_scales[3] (fc1 input dequant)")
            q2 = tm.scalar1(fc2_act_quant, "quant_scales[1] (fc2 activation quant)")
            w = dict(
                w13_weight=fc1_expert_weights, w2_weight=fc2_expert_weights,
                w13_weight_scale=tm.expand(fc1_dequant, local_e, "quant_scales[0]") / a1,
                w2_weight_scale=tm.expand(fc2_dequant, local_e, "quant_scales[2]") * q2,
                w13_input_scale=a1, w2_input_scale=1.0 / q2,
                w13_bias=fc1_expert_biases, w2_bias=fc2_expert_biases)
            return MoELayer(cfg, w)

        key = _key(fc1_expert_weights, fc2_expert_weights, *scales, fc1_expert_biases, fc2_expert_biases)
        layer = _layer("fi-fp8", key + (cfg,), build_fp8,
                       [fc1_expert_weights, fc2_expert_weights, fc1_expert_biases, fc2_expert_biases] + scales)
        if in_dtype in ("F8_E4M3", "U8"):
            xin = input if in_dtype == "F8_E4M3" else _arrays.Typed(input, "F8_E4M3")  # U8: raw fp8 bits
            x = tm.cast(tm.to_f32(xin) * tm.scalar1(fc1_in_dequant, "quant_scales[3]"), out_name)
        else:
            x = input
    elif w_dtype in ("U8", "I64", "I32") or w_dtype is None:
        if len(scales) != 6:
            raise invalid_argument("quant_scales", "[a1_gscale, fc1 block scales, g1_alphas, a2_gscale, fc2 block scales, "
                                   "g2_alphas] (NVFP4)", "%d tensors" % len(scales))
        a1_gs, w1_sf, g1_alphas, a2_gs, w2_sf, g2_alphas = scales
        cfg = LayerConfig(format="nvfp4", act_dtype="nvfp4", weight_scale_layout="swizzled_128x4", **act)

        def build_nvfp4() -> MoELayer:
            a1 = tm.expand(a1_gs, local_e, "quant_scales[0] (a1_gscale)")
            a2 = tm.expand(a2_gs, local_e, "quant_scales[3] (a2_gscale)")
            w = dict(
                w13_weight=fc1_expert_weights, w2_weight=fc2_expert_weights,
                w13_weight_scale=w1_sf, w2_weight_scale=w2_sf,
                w13_weight_scale_2=tm.expand(g1_alphas, local_e, "quant_scales[2] (g1_alphas)") * a1,
                w2_weight_scale_2=tm.expand(g2_alphas, local_e, "quant_scales[5] (g2_alphas)") * a2,
                w13_input_scale=1.0 / a1, w2_input_scale=1.0 / a2,
                w13_bias=fc1_expert_biases, w2_bias=fc2_expert_biases)
            return MoELayer(cfg, w)

        key = _key(fc1_expert_weights, fc2_expert_weights, *scales, fc1_expert_biases, fc2_expert_biases)
        layer = _layer("fi-nvfp4", key + (cfg,), build_nvfp4,
                       [fc1_expert_weights, fc2_expert_weights, fc1_expert_biases, fc2_expert_biases] + scales)
        if in_dtype in ("F32", "F16", "BF16"):
            x = input
        else:
            if input_sf is None:
                raise invalid_argument("input_sf", "the block scales of the NVFP4 input", "None")
            k = layer.hidden
            nb = k // 16
            pr, pc = swizzled_shape(m, nb)
            sw = _arrays.numel(input_sf) == pr * pc
            if not sw and _arrays.numel(input_sf) != m * nb:
                raise invalid_argument("input_sf", "%d (swizzled) or %d (linear) block scales" % (pr * pc, m * nb),
                                       "%d" % _arrays.numel(input_sf))
            x = tm.dequant_nvfp4(input, input_sf, a1_gs, m, k, out_name if out_name != "F32" else "BF16", sw)
    elif w_dtype in ("F32", "F16", "BF16"):
        if scales:
            raise invalid_argument("quant_scales", "no scales for unquantised weights", "%d tensors" % len(scales))
        fmt = {"F32": "fp32", "F16": "fp16", "BF16": "bf16"}[w_dtype]
        cfg = LayerConfig(format=fmt, **act)
        weights = dict(w13_weight=fc1_expert_weights, w2_weight=fc2_expert_weights, w13_bias=fc1_expert_biases,
                       w2_bias=fc2_expert_biases)
        key = _key(fc1_expert_weights, fc2_expert_weights, fc1_expert_biases, fc2_expert_biases)
        layer = _layer("fi-float", key + (cfg,), lambda: MoELayer(cfg, weights), list(weights.values()))
        x = input
    else:
        raise invalid_argument("fc1_expert_weights", "float32, float16, bfloat16, float8_e4m3fn or packed NVFP4 (uint8 / int64)",
                               w_dtype)

    expert_map = None
    if ep_size > 1:
        expert_map = get_layer(("fi-expert-map", _arrays.identity(fc1_expert_weights), ep_size, ep_rank, local_e),
                               lambda: tm.expert_map_for(fc1_expert_weights, ep_size, ep_rank, local_e),
                               refs=[fc1_expert_weights])
    x_dtype = _arrays.dtype_name(x)
    direct = output is not None and _arrays.dtype_name(output) == x_dtype
    result = layer(x, token_selected_experts, token_final_scales, expert_map=expert_map,
                   output=output if direct else None, stream=stream)
    if x_dtype != out_name or (output is not None and not direct):
        if output is None:
            return tm.cast(result, out_name)
        tm.copy_into(output, result)
        return output
    return result


# ---------------------------------------------------------------------------------------------
# vLLM

def cutlass_moe_fp8(
    a: Any,
    w1_q: Any,
    w2_q: Any,
    topk_weights: Any,
    topk_ids: Any,
    ab_strides1: Any,
    ab_strides2: Any,
    c_strides1: Any,
    c_strides2: Any,
    quant_config: Any,
    activation: Any = "silu",
    expert_map: Any = None,
    apply_router_weight_on_input: bool = False,
    global_num_experts: int = -1,
    *,
    stream: Optional[int] = None,
) -> Any:
    """vLLM's ``cutlass_moe_fp8`` on fusedmoe: FP8 weights, FP8 activations, output in ``a``'s dtype.

    ``w1_q`` [E, 2N, K] float8_e4m3fn, or its transpose [E, K, 2N] as vLLM passes it (a view of
    [E, 2N, K] memory); ``w2_q`` likewise. ``quant_config`` (vLLM's ``FusedMoEQuantConfig`` or
    :class:`FusedMoEQuantConfig`): ``w1_scale`` [E] or [E, 2N], ``w2_scale`` [E] or [E, K],
    ``a1_scale`` / ``a2_scale`` (per-tensor static scales, or None for dynamic),
    ``per_act_token_quant``, ``per_out_ch_quant``, optional ``w1_bias`` / ``w2_bias``.
    gate/up order [gate; up] (vLLM).

    Differences:
        * ``ab_strides*`` / ``c_strides*`` are accepted and ignored (fusedmoe reads the tensors' own
          strides).
        * Per-tensor weight scales with per-token activations run as ``fp8-channel`` with the
          scale broadcast over the rows (the same numbers). Per-channel weight scales with a
          per-tensor activation scale, and static per-token activation scales, are not fusedmoe
          formats: :class:`fusedmoe.Unsupported`.
        * ``apply_router_weight_on_input`` works for any top-k (vLLM: top-k 1 only).
    """
    k = _arrays.shape(a)[1]
    w1 = tm.weights_nkc(w1_q, k, "w1_q")
    w2 = _w2_nkc(w2_q, k)
    e, r, _ = _arrays.shape(w1)
    w1_scale, w2_scale = _qc(quant_config, "w1_scale"), _qc(quant_config, "w2_scale")
    a1_scale, a2_scale = _qc(quant_config, "a1_scale"), _qc(quant_config, "a2_scale")
    per_act = bool(_qc(quant_config, "per_act_token_quant"))
    if w1_scale is None or w2_scale is None:
        raise invalid_argument("quant_config.w1_scale", "FP8 weight scales", "None")
    per_ch = _arrays.numel(w1_scale) != e or bool(_qc(quant_config, "per_out_ch_quant"))
    act = vllm_activation(activation)
    if per_act and (a1_scale is not None or a2_scale is not None):
        raise unsupported("cutlass_moe_fp8: static per-token activation scales are not a fusedmoe format (per-token "
                          "scales are computed from the activations)")
    if per_ch and not per_act:
        raise unsupported("cutlass_moe_fp8: per-channel weight scales with per-tensor activation scales are not a "
                          "fusedmoe format (fp8-channel quantises activations per token)")
    b1, b2 = _qc(quant_config, "w1_bias"), _qc(quant_config, "w2_bias")
    fmt = "fp8-channel" if per_act else "fp8-tensor"
    cfg = LayerConfig(format=fmt, **act)

    def build() -> MoELayer:
        if per_act:
            s1 = _rows_scale(w1_scale, e, r, "quant_config.w1_scale")
            s2 = _rows_scale(w2_scale, e, _arrays.shape(w2)[1], "quant_config.w2_scale")
            w = dict(w13_weight=w1, w2_weight=w2, w13_weight_scale=s1, w2_weight_scale=s2)
        else:
            w = dict(w13_weight=w1, w2_weight=w2, w13_weight_scale=tm.expand(w1_scale, e, "quant_config.w1_scale"),
                     w2_weight_scale=tm.expand(w2_scale, e, "quant_config.w2_scale"),
                     w13_input_scale=tm.scalar1(a1_scale, "quant_config.a1_scale") if a1_scale is not None else None,
                     w2_input_scale=tm.scalar1(a2_scale, "quant_config.a2_scale") if a2_scale is not None else None)
        w.update(w13_bias=_bias_f32(b1), w2_bias=_bias_f32(b2))
        return MoELayer(cfg, w)

    key = _key(w1, w2, w1_scale, w2_scale, a1_scale, a2_scale, b1, b2) + (cfg,)
    layer = _layer("vllm-fp8", key, build, [w1_q, w2_q, w1_scale, w2_scale, a1_scale, a2_scale, b1, b2])
    return layer(a, topk_ids, topk_weights, expert_map=expert_map,
                 apply_router_weight_on_input=apply_router_weight_on_input, stream=stream)


def _w2_nkc(w2_q: Any, k: int) -> Any:
    """w2 as [E, K, N] row-major (given [E, K, N] or the transposed view [E, N, K])."""
    shp = _arrays.shape(w2_q)
    if len(shp) != 3:
        raise invalid_argument("w2_q", "3 dimensions", list(shp))
    if shp[1] == k and tm.is_contiguous(w2_q):
        return w2_q
    if shp[2] == k:
        t = tm.swap12(w2_q)
        if tm.is_contiguous(t):
            return t
    if shp[1] == k:
        return w2_q
    raise invalid_argument("w2_q", "shape [E, %d, N] or its transpose [E, N, %d]" % (k, k), list(shp))


def _rows_scale(scale: Any, e: int, rows: int, name: str) -> Any:
    """[E, rows] float32 from per-channel [E, rows] / [E, rows, 1] or per-tensor [E] scales."""
    n = _arrays.numel(scale)
    if n == e * rows:
        v = tm.flat_f32(scale)
        return tm.contiguous(v.reshape(e, rows))
    if n == e:
        v = tm.flat_f32(scale).reshape(e, 1)
        if tm.is_torch(v):
            return v.expand(e, rows).contiguous()
        xp = tm.xp_of(v)
        return xp.ascontiguousarray(xp.broadcast_to(v, (e, rows))).astype("float32")
    raise invalid_argument(name, "%d (per tensor) or %d (per channel) values" % (e, e * rows), "%d values" % n)


def _bias_f32(b: Any) -> Any:
    if b is None:
        return None
    if _arrays.dtype_name(b) == "F32":
        return b
    return tm.contiguous(tm.to_f32(b))


def cutlass_moe_w4a8_fp8(
    a: Any,
    w1_q: Any,
    w2_q: Any,
    topk_weights: Any,
    topk_ids: Any,
    a_strides1: Any,
    a_strides2: Any,
    b_strides1: Any,
    b_strides2: Any,
    c_strides1: Any,
    c_strides2: Any,
    s_strides1: Any,
    s_strides2: Any,
    quant_config: Any,
    moe_config: Any = None,
    activation: Any = "silu",
    expert_map: Any = None,
    apply_router_weight_on_input: bool = False,
    global_num_experts: int = -1,
    group_size: int = 128,
    *,
    int4_encoding: str = "uint4b8",
    stream: Optional[int] = None,
) -> Any:
    """vLLM's ``cutlass_moe_w4a8_fp8`` on fusedmoe: int4 weights (group 128, bf16 scales), per-token
    dynamic FP8 activations, bf16 output.

    ``w1_q`` [E, 2N, K / 8] int32 (eight int4 per int32 along K, element 2i of each byte in the low
    nibble) or the same bytes as uint8 [E, 2N, K / 2]; ``w2_q`` [E, K, N / 8]. The int4 values are
    stored with offset 8 (``int4_encoding="uint4b8"``, the checkpoint format) or as two's complement
    (``"signed"``). ``quant_config.w1_scale`` / ``w2_scale``: the bf16 group scales
    [E, 2N, K / 128] / [E, K, N / 128]. gate/up order [gate; up].

    Differences:
        * Takes the checkpoint layout: vLLM's load-time CUTLASS re-encoding of the weights
          (``cutlass_encode_and_reorder_int4b``) and its packed fp8 scales (``cutlass_pack_scale_fp8``
          with per-channel ``g1_alphas``) are not accepted (fusedmoe does that split itself from the
          bf16 scales, docs/SEMANTICS.md). fp8 ``w1_scale`` raises :class:`fusedmoe.Unsupported`.
        * The stride tensors and ``moe_config`` are accepted and ignored; only ``group_size=128``.
    """
    if int(group_size) != 128:
        raise unsupported("cutlass_moe_w4a8_fp8: group_size %d (fusedmoe's w4a8-int4 uses groups of 128)" % group_size)
    w1_scale, w2_scale = _qc(quant_config, "w1_scale"), _qc(quant_config, "w2_scale")
    if w1_scale is None or w2_scale is None:
        raise invalid_argument("quant_config.w1_scale", "bf16 group scales [E, 2N, K/128]", "None")
    for name, s in (("w1_scale", w1_scale), ("w2_scale", w2_scale)):
        dt = _arrays.dtype_name(s)
        if dt not in ("BF16",) and not (dt is None and _arrays.numel(s) > 0):
            raise unsupported("cutlass_moe_w4a8_fp8: quant_config.%s has dtype %s; fusedmoe takes the bf16 checkpoint "
                              "group scales (vLLM's packed fp8 scales + per-channel alphas are not accepted)" % (name, dt))
    if _qc(quant_config, "a1_scale") is not None:
        raise unsupported("cutlass_moe_w4a8_fp8: static activation scales (fusedmoe quantises per token, dynamically)")
    act = vllm_activation(activation)
    b1, b2 = _qc(quant_config, "w1_bias"), _qc(quant_config, "w2_bias")
    cfg = LayerConfig(format="w4a8-int4", int4_encoding=int4_encoding, **act)
    weights = dict(w13_weight=w1_q, w2_weight=w2_q, w13_weight_scale=w1_scale, w2_weight_scale=w2_scale)

    def build() -> MoELayer:
        w = dict(weights)
        w.update(w13_bias=_bias_f32(b1), w2_bias=_bias_f32(b2))
        return MoELayer(cfg, w)

    key = _key(w1_q, w2_q, w1_scale, w2_scale, b1, b2) + (cfg,)
    layer = _layer("vllm-w4a8", key, build, [w1_q, w2_q, w1_scale, w2_scale, b1, b2])
    return layer(a, topk_ids, topk_weights, expert_map=expert_map,
                 apply_router_weight_on_input=apply_router_weight_on_input, stream=stream)


def _blockscale_layout(scale: Any, e: int, rows: int, cols: int, layout: str, name: str) -> Tuple[Any, str]:
    """(scales viewed as [E, rows', cols'], 'linear' | 'swizzled_128x4') from any shape holding
    E * rows * cols (linear) or E * padded bytes (swizzled) 1-byte codes."""
    n = _arrays.numel(scale)
    pr, pc = swizzled_shape(rows, cols)
    lin, sw = e * rows * cols, e * pr * pc
    if layout == "auto":
        layout = "swizzled" if n == sw else "linear" if n == lin else ""
    if layout in ("swizzled", "swizzled_128x4") and n == sw:
        return _bytes_view(scale, (e, pr, pc)), "swizzled_128x4"
    if layout == "linear" and n == lin:
        return _bytes_view(scale, (e, rows, cols)), "linear"
    raise invalid_argument(name, "%d scale codes (128x4-swizzled [E,%d,%d]) or %d (linear [E,%d,%d])"
                           % (sw, pr, pc, lin, rows, cols), "%d (shape %s)" % (n, list(_arrays.shape(scale))))


def _bytes_view(x: Any, shp: Tuple[int, ...]) -> Any:
    """x's bytes viewed as shape ``shp`` (1-byte dtype; contiguous input; no copy)."""
    base = tm.unwrap(x)
    if tm.is_torch(base):
        torch = _arrays._torch()
        t = base.detach()
        if t.element_size() != 1:
            t = t.view(torch.uint8)
        return t.reshape(shp)
    if base.dtype.itemsize != 1:
        base = base.view("uint8")
    return base.reshape(shp)


def run_cutlass_moe_fp4(
    output: Any,
    a: Any,
    a1_gscale: Any,
    w1_fp4: Any,
    w1_blockscale: Any,
    w1_alphas: Any,
    a2_gscale: Any,
    w2_fp4: Any,
    w2_blockscale: Any,
    w2_alphas: Any,
    topk_weights: Any,
    topk_ids: Any,
    activation: Any,
    workspace13: Any,
    workspace2: Any,
    m: int,
    n: int,
    k: int,
    e: int,
    device: Any = None,
    apply_router_weight_on_input: bool = False,
    *,
    blockscale_layout: str = "auto",
    stream: Optional[int] = None,
) -> None:
    """vLLM's ``run_cutlass_moe_fp4`` on fusedmoe: NVFP4 weights and activations (W4A4), writes
    ``output`` [m, k] in ``a``'s dtype (bf16 / fp16).

    ``a1_gscale`` / ``a2_gscale``: activation global *encode* scales (1 / input_scale), scalar or [e];
    ``w1_fp4`` [e, 2n, k/2] uint8 (n for relu2_no_mul); ``w1_blockscale`` e4m3 block scales, in the
    128x4 swizzled layout vLLM stores them in ([e, round_up(2n,128), round_up(k/16,4)], any shape
    with that many bytes) or linear [e, 2n, k/16]; ``w1_alphas`` [e] = 1 / (a1_gscale * w1 global
    scale); likewise for GEMM2. gate/up order [gate; up].

    Differences:
        * ``workspace13`` / ``workspace2`` are used as fusedmoe's workspace when one is large enough,
          else a workspace is allocated with the tensors' framework.
        * ``blockscale_layout`` (keyword, fusedmoe's): ``auto`` takes the layout from the byte count,
          preferring swizzled (vLLM's) where both match; ``linear`` / ``swizzled`` force it.
        * ``apply_router_weight_on_input`` works for any top-k and does not modify ``a``.
    """
    topk = _check_topk(topk_ids, topk_weights, int(m))
    act = vllm_activation(activation)
    e, n, k = int(e), int(n), int(k)
    rows1 = n if act["activation"] == "relu2" else 2 * n
    s1, lay1 = _blockscale_layout(w1_blockscale, e, rows1, k // 16, blockscale_layout, "w1_blockscale")
    s2, lay2 = _blockscale_layout(w2_blockscale, e, k, n // 16, blockscale_layout, "w2_blockscale")
    if lay1 != lay2:
        raise invalid_argument("w2_blockscale", "the layout of w1_blockscale (%s)" % lay1, lay2)
    cfg = LayerConfig(format="nvfp4", act_dtype="nvfp4", weight_scale_layout=lay1, **act)

    def build() -> MoELayer:
        g1 = tm.expand(a1_gscale, e, "a1_gscale")
        g2 = tm.expand(a2_gscale, e, "a2_gscale")
        w = dict(w13_weight=w1_fp4, w2_weight=w2_fp4,
                 w13_weight_scale=s1, w2_weight_scale=s2,
                 w13_weight_scale_2=tm.expand(w1_alphas, e, "w1_alphas") * g1,
                 w2_weight_scale_2=tm.expand(w2_alphas, e, "w2_alphas") * g2,
                 w13_input_scale=1.0 / g1, w2_input_scale=1.0 / g2)
        return MoELayer(cfg, w)

    key = _key(w1_fp4, w2_fp4, w1_blockscale, w2_blockscale, w1_alphas, w2_alphas, a1_gscale, a2_gscale) + (cfg,)
    layer = _layer("vllm-fp4", key, build, [w1_fp4, w2_fp4, w1_blockscale, w2_blockscale, w1_alphas, w2_alphas,
                                            a1_gscale, a2_gscale])
    ws = _workspace_from(layer, int(m), topk, workspace13, workspace2)
    layer(a, topk_ids, topk_weights, apply_router_weight_on_input=apply_router_weight_on_input, output=output,
          workspace=ws, stream=stream)


_MXFP4_ACT_WARNED = False


def run_cutlass_moe_mxfp4(
    output: Any,
    a: Any,
    w1_fp4: Any,
    w1_blockscale: Any,
    w2_fp4: Any,
    w2_blockscale: Any,
    topk_weights: Any,
    topk_ids: Any,
    activation: Any,
    workspace13: Any,
    workspace2: Any,
    m: int,
    n: int,
    k: int,
    e: int,
    device: Any = None,
    apply_router_weight_on_input: bool = False,
    *,
    act_dtype: Optional[str] = None,
    blockscale_layout: str = "auto",
    stream: Optional[int] = None,
) -> None:
    """vLLM's ``run_cutlass_moe_mxfp4`` on fusedmoe: MXFP4 weights (e2m1, E8M0 block-32 scales),
    writes ``output`` [m, k] in ``a``'s dtype.

    ``w1_fp4`` [e, 2n, k/2] uint8; ``w1_blockscale`` E8M0 codes, 128x4-swizzled as
    :func:`swizzle_mxfp4_scales` makes them (any shape with that many bytes) or linear
    [e, 2n, k/32]; likewise for GEMM2. gate/up order [gate; up].

    Differences:
        * vLLM quantises the activations to MXFP4 too (W4A4); MXFP4 activations are not a fusedmoe
          format. This runs the activations in bf16 (``act_dtype="bf16"``, the default: more
          accurate than vLLM's) or per-token FP8 (``act_dtype="fp8"``). The first call without an
          explicit ``act_dtype`` warns once. Results differ from vLLM's by vLLM's MXFP4 activation
          quantisation error.
        * Workspace and ``blockscale_layout`` as in :func:`run_cutlass_moe_fp4`.
    """
    global _MXFP4_ACT_WARNED
    if act_dtype is None:
        if not _MXFP4_ACT_WARNED:
            warnings.warn("fusedmoe.seeds.run_cutlass_moe_mxfp4: MXFP4 activations (W4A4) are not a fusedmoe format; "
                          "running MXFP4 weights with bf16 activations (pass act_dtype='bf16' or 'fp8' to choose and "
                          "silence this)", stacklevel=2)
            _MXFP4_ACT_WARNED = True
        act_dtype = "bf16"
    topk = _check_topk(topk_ids, topk_weights, int(m))
    act = vllm_activation(activation)
    e, n, k = int(e), int(n), int(k)
    rows1 = n if act["activation"] == "relu2" else 2 * n
    s1, lay1 = _blockscale_layout(w1_blockscale, e, rows1, k // 32, blockscale_layout, "w1_blockscale")
    s2, lay2 = _blockscale_layout(w2_blockscale, e, k, n // 32, blockscale_layout, "w2_blockscale")
    if lay1 != lay2:
        raise invalid_argument("w2_blockscale", "the layout of w1_blockscale (%s)" % lay1, lay2)
    cfg = LayerConfig(format="mxfp4", act_dtype=act_dtype, weight_scale_layout=lay1, **act)
    weights = dict(w13_weight=w1_fp4, w2_weight=w2_fp4, w13_weight_scale=s1, w2_weight_scale=s2)
    key = _key(w1_fp4, w2_fp4, w1_blockscale, w2_blockscale) + (cfg,)
    layer = _layer("vllm-mxfp4", key, lambda: MoELayer(cfg, weights), [w1_fp4, w2_fp4, w1_blockscale, w2_blockscale])
    ws = _workspace_from(layer, int(m), topk, workspace13, workspace2)
    layer(a, topk_ids, topk_weights, apply_router_weight_on_input=apply_router_weight_on_input, output=output,
          workspace=ws, stream=stream)


def swizzle_mxfp4_scales(scales: Any, N: int, K: int) -> Any:
    """vLLM's ``swizzle_mxfp4_scales``: flat [N, K // 32] E8M0 scales (uint8) -> the CUTLASS 128x4
    tiled layout [ceil(N/128), ceil(K/128), 32, 4, 4], returned flat (1-D, padding bytes 0), on the
    tensor's device. Also accepts [..., N, K // 32] batches (returns [..., padded bytes]).
    The layout is :func:`fusedmoe.swizzle_scales_128x4`'s."""
    from ._ops import swizzle_scales_128x4  # noqa: PLC0415

    shp = _arrays.shape(scales)
    cols = int(K) // 32
    if len(shp) < 2 or shp[-2:] != (int(N), cols):
        if _arrays.numel(scales) == int(N) * cols:
            scales = _arrays.reshape(scales, (int(N), cols))
            shp = (int(N), cols)
        else:
            raise invalid_argument("scales", "shape [%d,%d] ([N, K // 32])" % (int(N), cols), list(shp))
    out = swizzle_scales_128x4(scales)
    pr, pc = swizzled_shape(int(N), cols)
    return _arrays.reshape(out, shp[:-2] + (pr * pc,) if len(shp) > 2 else (pr * pc,))


def deep_gemm_moe_fp8(
    hidden_states: Any,
    w1: Any,
    w2: Any,
    w1_scale: Any,
    w2_scale: Any,
    topk_weights: Any,
    topk_ids: Any,
    inplace: bool = False,
    activation: Any = "silu",
    global_num_experts: int = -1,
    expert_map: Any = None,
    a1_scale: Any = None,
    a2_scale: Any = None,
    apply_router_weight_on_input: bool = False,
    *,
    use_ue8m0: bool = False,
    hidden_states_scale: Any = None,
    out_dtype: Any = None,
    stream: Optional[int] = None,
) -> Any:
    """vLLM's ``deep_gemm_moe_fp8`` on fusedmoe: FP8 weights in 128x128 blocks, FP8 activations in
    1x128 groups (DeepSeek-V3), bf16 output.

    ``w1`` [E, 2N, K] float8_e4m3fn (or the transposed view [E, K, 2N]); ``w1_scale``
    [E, ceil(2N/128), ceil(K/128)] float32; ``w2`` [E, K, N], ``w2_scale`` [E, ceil(K/128), ceil(N/128)].
    gate/up order [gate; up].

    ``hidden_states`` [M, K] bf16 (as vLLM's function takes it; fusedmoe quantises it per token
    and group of 128 exactly as vLLM's ``per_token_group_quant_fp8`` does), or already quantised
    as DeepGEMM takes its activations (what vLLM's ``DeepGemmExperts.apply`` receives from the
    prepare step): float8_e4m3fn codes [M, K] with their 1x128 group scales float32
    [M, ceil(K/128)] in ``hidden_states_scale`` (keyword, fusedmoe's) or in ``a1_scale``. Those
    are used as given, never quantised again (bitwise the result of passing the bf16 input they
    were quantised from, docs/NUMERICS.md).

    Differences:
        * DeepGEMM's alignment limits (M >= 128, N and K multiples of 128, N > 512) do not apply.
        * ``use_ue8m0`` (keyword, fusedmoe's): activation scales rounded up to powers of two (DeepGEMM
          on Blackwell); default fp32 scales (Hopper). Given (pre-quantised) scales are not rounded.
        * Pre-quantised inputs are a fusedmoe extension (vLLM's function quantises bf16 inputs
          itself): scales row-major [M, ceil(K/128)] (a strided view, e.g. DeepGEMM's column-major
          TMA-aligned scales viewed as [M, K/128], is copied contiguous here); the output dtype is
          ``out_dtype`` (keyword, fusedmoe's; default bf16, what DeepGEMM writes), which is also the
          activation dtype; ``inplace`` is refused (an fp8 buffer cannot hold the output) and so is
          ``apply_router_weight_on_input``.
        * Static activation scales (``a1_scale`` / ``a2_scale`` as vLLM documents them: scalar or
          [M], quantising unquantised inputs) are not a fusedmoe format with block-scaled weights:
          :class:`fusedmoe.Unsupported`. ``a1_scale`` is only read as the group scales of fp8 inputs.
        * ``inplace=True`` computes into a new buffer, then copies into ``hidden_states``.
        * ``w1_scale`` of shape [E] or [E, 2N] (per-tensor / per-channel, as the seed's docstring
          also allows) runs ``fp8-tensor`` / ``fp8-channel`` with dynamic activation scales (unquantised
          inputs only).
    """
    x_dtype = _arrays.dtype_name(hidden_states)
    prequantized = x_dtype == "F8_E4M3" or (x_dtype == "U8" and (hidden_states_scale is not None or a1_scale is not None))
    if prequantized:
        if hidden_states_scale is not None and a1_scale is not None:
            raise invalid_argument("a1_scale", "None when hidden_states_scale is given (both name the input's group "
                                   "scales)", "a tensor")
        hidden_states_scale = hidden_states_scale if hidden_states_scale is not None else a1_scale
        if hidden_states_scale is None:
            raise invalid_argument("hidden_states_scale", "float32 [M, ceil(K/128)] group scales with float8 "
                                   "hidden_states (or pass them as a1_scale)", "None")
        if a2_scale is not None:
            raise unsupported("deep_gemm_moe_fp8: static a2_scale with block-scaled weights is not a fusedmoe format; "
                              "fusedmoe quantises GEMM2's input per token and group of 128")
        if inplace:
            raise invalid_argument("inplace", "False with pre-quantised float8 hidden_states (the output is %s)"
                                   % (tm.dtype_from_any(out_dtype) or "BF16"), "True")
        if not tm.is_contiguous(hidden_states_scale):
            hidden_states_scale = tm.contiguous(hidden_states_scale)
        if x_dtype == "U8":
            hidden_states = _arrays.Typed(hidden_states, "F8_E4M3")
    elif a1_scale is not None or a2_scale is not None:
        raise unsupported("deep_gemm_moe_fp8: static activation scales (a1_scale / a2_scale) with block-scaled "
                          "weights are not a fusedmoe format; fusedmoe quantises per token and group of 128 "
                          "(a1_scale is read as the group scales only with float8 hidden_states)")
    elif hidden_states_scale is not None:
        raise invalid_argument("hidden_states_scale", "None with unquantised hidden_states (group scales go with "
                               "float8_e4m3fn codes)", "a tensor")
    k = _arrays.shape(hidden_states)[1]
    w1v = tm.weights_nkc(w1, k, "w1")
    w2v = _w2_nkc(w2, k)
    e, r, _ = _arrays.shape(w1v)
    act = vllm_activation(activation)
    nd = len(_arrays.shape(w1_scale))
    if nd == 3:
        cfg = LayerConfig(format="fp8-block", fp8_block_ue8m0=bool(use_ue8m0), **act)
        weights = dict(w13_weight=w1v, w2_weight=w2v, w13_weight_scale=w1_scale, w2_weight_scale=w2_scale)
        build = lambda: MoELayer(cfg, weights)  # noqa: E731
    elif prequantized:
        raise unsupported("deep_gemm_moe_fp8: pre-quantised 1x128-group inputs need 128x128 block weight scales "
                          "[E, ceil(2N/128), ceil(K/128)] (fp8-block); w1_scale has shape %s"
                          % list(_arrays.shape(w1_scale)))
    elif _arrays.numel(w1_scale) == e:
        cfg = LayerConfig(format="fp8-tensor", **act)
        build = lambda: MoELayer(cfg, dict(  # noqa: E731
            w13_weight=w1v, w2_weight=w2v, w13_weight_scale=tm.expand(w1_scale, e, "w1_scale"),
            w2_weight_scale=tm.expand(w2_scale, e, "w2_scale")))
    else:
        cfg = LayerConfig(format="fp8-channel", **act)
        build = lambda: MoELayer(cfg, dict(  # noqa: E731
            w13_weight=w1v, w2_weight=w2v, w13_weight_scale=_rows_scale(w1_scale, e, r, "w1_scale"),
            w2_weight_scale=_rows_scale(w2_scale, e, k, "w2_scale")))
    key = _key(w1v, w2v, w1_scale, w2_scale) + (cfg,)
    layer = _layer("vllm-deepgemm", key, build, [w1, w2, w1_scale, w2_scale])
    if prequantized:
        return layer(hidden_states, topk_ids, topk_weights, expert_map=expert_map,
                     apply_router_weight_on_input=apply_router_weight_on_input, stream=stream,
                     hidden_states_scale=hidden_states_scale, out_dtype=out_dtype if out_dtype is not None else "bf16")
    out = layer(hidden_states, topk_ids, topk_weights, expert_map=expert_map,
                apply_router_weight_on_input=apply_router_weight_on_input, stream=stream, out_dtype=out_dtype)
    if inplace:
        tm.copy_into(hidden_states, out)
        return hidden_states
    return out
