"""Routing, quantisers, the 128x4 scale swizzle, codecs, the layer builder and layer files.

Routing runs on the tensor's own device (CPU, or CUDA on the framework's current stream). The
quantisers and codecs are the library's CPU reference implementations (bit-exact with the CUDA
kernels'): CUDA arrays raise :class:`fusedmoe.Unsupported`. The swizzle runs on the CPU through
the library and on CUDA PyTorch tensors through torch operations on the tensor's device.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple, Union

from . import _arrays, _core
from ._errors import invalid_argument, unsupported
from ._layer import LayerConfig

__all__ = [
    "route",
    "quantize_fp8_per_tensor",
    "quantize_fp8_per_token",
    "quantize_fp8_per_token_group",
    "quantize_nvfp4",
    "nvfp4_global_scale",
    "quantize_fp8_block_weight",
    "quantize_mxfp4",
    "quantize_int4_group",
    "w4a8_split_scales",
    "swizzle_scales_128x4",
    "unswizzle_scales_128x4",
    "swizzled_shape",
    "encode",
    "decode",
    "random_float_layer",
    "quantize_layer",
    "dequantize_layer",
    "read_layer_file",
    "write_layer_file",
    "workspace_size",
]


def _cpu_only(x: Any, name: str, what: str) -> None:
    dev = _arrays.device(x)
    if dev[0] != "cpu":
        raise unsupported("%s runs on the CPU only; '%s' is on %s:%d (copy it to the host, or let the layer "
                          "quantise on the device)" % (what, name, dev[0], dev[1]))


def _out(like: Any, shape, dtype: str) -> Any:
    """A new CPU output: torch tensors for torch inputs, else NumPy (fp8 / bf16 as raw uint8 / uint16)."""
    if _arrays.framework(like) == "torch":
        return _arrays.empty(like, shape, dtype)
    import numpy as np  # noqa: PLC0415

    return np.empty(tuple(shape), dtype=_arrays._NUMPY_STORAGE[_arrays._canonical_dtype(dtype)])


def _c(x: Any) -> Any:
    return _arrays.core_arg(x)


# ---- routing -------------------------------------------------------------------------------

def route(
    router_logits: Any,
    topk: int,
    *,
    score: str = "softmax",
    renormalize: bool = True,
    num_groups: int = 0,
    topk_groups: int = 0,
    correction_bias: Any = None,
    routed_scaling_factor: float = 1.0,
    topk_weights: Any = None,
    topk_ids: Any = None,
    stream: Optional[int] = None,
) -> Tuple[Any, Any]:
    """Router: logits [M, E] -> (topk_weights [M, topk] float32, topk_ids [M, topk] int32).

    softmax or sigmoid scores; ``correction_bias`` [E] is added for selection only (DeepSeek-V3);
    grouped top-k keeps the ``topk_groups`` best of ``num_groups`` groups (sum of each group's two
    largest biased scores); weights are renormalised when asked, then scaled. Ties go to the lower
    index. Runs where the logits are (CPU, or CUDA on ``stream`` / the current stream), with the
    same results bit for bit. bf16 / fp16 logits are converted to float32 first.
    """
    logits = _arrays.as_f32_weights(router_logits)
    shp = _arrays.shape(logits)
    if len(shp) != 2:
        raise invalid_argument("router_logits", "shape [num_tokens, num_experts]", list(shp))
    m = shp[0]
    if topk_weights is None:
        topk_weights = _arrays.empty(logits, (m, int(topk)), "F32")
    if topk_ids is None:
        topk_ids = _arrays.empty(logits, (m, int(topk)), "I32")
    if _arrays.shape(topk_ids)[-1:] != (int(topk),):
        raise invalid_argument("topk_ids", "shape [%d,%d]" % (m, int(topk)), list(_arrays.shape(topk_ids)))
    if stream is None:
        stream = _arrays.current_stream(logits)
    _core.route(_c(logits), _c(topk_ids), _c(topk_weights), score, bool(renormalize), int(num_groups),
                int(topk_groups), _c(correction_bias), float(routed_scaling_factor), stream)
    return topk_weights, topk_ids


# ---- activation quantisers --------------------------------------------------------------------

def quantize_fp8_per_tensor(x: Any, scale: Optional[float] = None) -> Tuple[Any, float]:
    """q = e4m3(clamp(x / s, +-448)) with s = ``scale`` or amax(x) / 448. Returns (q, s)."""
    _cpu_only(x, "x", "quantize_fp8_per_tensor")
    q = _out(x, _arrays.shape(x), "F8_E4M3")
    s = _core.quantize_fp8_per_tensor(_c(x), _c(q), scale)
    return q, float(s)


def quantize_fp8_per_token(x: Any) -> Tuple[Any, Any]:
    """Per row: s = max(amax_row, 1e-10) / 448. Returns (q [..., K] fp8, scales [...] float32)."""
    _cpu_only(x, "x", "quantize_fp8_per_token")
    shp = _arrays.shape(x)
    q = _out(x, shp, "F8_E4M3")
    s = _out(x, shp[:-1] if len(shp) > 1 else (1,), "F32")
    _core.quantize_fp8_per_row(_c(x), _c(q), _c(s))
    return q, s


def quantize_fp8_per_token_group(x: Any, group_size: int = 128, ue8m0: bool = False) -> Tuple[Any, Any]:
    """Per row and group of ``group_size`` along the last dimension (vLLM's
    ``per_token_group_quant_fp8``): s = max(amax, 1e-10) / 448 (ue8m0: rounded up to 2^k).
    Returns (q, scales [..., ceil(K / group_size)] row-major)."""
    _cpu_only(x, "x", "quantize_fp8_per_token_group")
    shp = _arrays.shape(x)
    q = _out(x, shp, "F8_E4M3")
    s = _out(x, shp[:-1] + (-(-shp[-1] // int(group_size)),), "F32")
    _core.quantize_fp8_per_token_group(_c(x), _c(q), _c(s), int(group_size), bool(ue8m0))
    return q, s


def nvfp4_global_scale(x: Any) -> float:
    """gs = 448 * 6 / amax(x) (1 when x is all zero): the NVFP4 global encode scale."""
    _cpu_only(x, "x", "nvfp4_global_scale")
    return float(_core.nvfp4_global_scale(_c(x)))


def quantize_nvfp4(x: Any, global_scale: Optional[float] = None) -> Tuple[Any, Any, float]:
    """NVFP4: per block of 16, sf = e4m3(gs * amax / 6), q = e2m1(x * gs / sf).

    Returns (q [..., K/2] packed uint8, scales [..., K/16] e4m3 (linear, not swizzled), gs). The
    dequantised value is q * sf / gs; checkpoints store input_scale = 1 / gs."""
    _cpu_only(x, "x", "quantize_nvfp4")
    gs = float(global_scale) if global_scale is not None else nvfp4_global_scale(x)
    shp = _arrays.shape(x)
    q = _out(x, shp[:-1] + (shp[-1] // 2,), "U8")
    sf = _out(x, shp[:-1] + (shp[-1] // 16,), "F8_E4M3")
    _core.quantize_nvfp4(_c(x), gs, _c(q), _c(sf))
    return q, sf, gs


# ---- weight quantisers ------------------------------------------------------------------------

def quantize_fp8_block_weight(w: Any) -> Tuple[Any, Any]:
    """128x128 blocks of [..., rows, cols]: s = max(amax_block, 1e-10) / 448.
    Returns (q fp8, scales [..., ceil(rows/128), ceil(cols/128)] float32)."""
    _cpu_only(w, "w", "quantize_fp8_block_weight")
    shp = _arrays.shape(w)
    q = _out(w, shp, "F8_E4M3")
    s = _out(w, shp[:-2] + (-(-shp[-2] // 128), -(-shp[-1] // 128)), "F32")
    _core.quantize_fp8_block_weight(_c(w), _c(q), _c(s))
    return q, s


def quantize_mxfp4(w: Any, rounding: str = "nvidia") -> Tuple[Any, Any]:
    """MXFP4: per block of 32, an E8M0 exponent (``nvidia``: ceil(log2(amax / 6)), vLLM and
    FlashInfer; ``ocp``: floor(log2(amax)) - 2), q = e2m1(w / 2^e).
    Returns (q [..., K/2] packed uint8, scales [..., K/32] uint8 E8M0 codes, linear)."""
    _cpu_only(w, "w", "quantize_mxfp4")
    shp = _arrays.shape(w)
    q = _out(w, shp[:-1] + (shp[-1] // 2,), "U8")
    s = _out(w, shp[:-1] + (shp[-1] // 32,), "U8")
    _core.quantize_mxfp4(_c(w), _c(q), _c(s), rounding)
    return q, s


def quantize_int4_group(w: Any, group_size: int = 128, encoding: str = "signed") -> Tuple[Any, Any]:
    """W4A8 int4 weights: per row and group, s = bf16(amax / 7) (1 if 0), q = clamp(rne(w / s), -8, 7).
    Returns (q [..., K/2] packed uint8, two per byte, element 2i in the low nibble, ``signed``
    two's complement or ``uint4b8`` = q + 8; scales [..., K/group] bf16 (uint16 bits for NumPy))."""
    _cpu_only(w, "w", "quantize_int4_group")
    shp = _arrays.shape(w)
    q = _out(w, shp[:-1] + (shp[-1] // 2,), "U8")
    s = _out(w, shp[:-1] + (shp[-1] // int(group_size),), "BF16")
    _core.quantize_int4_group(_c(w), _c(q), _c(s), int(group_size), encoding)
    return q, s


def w4a8_split_scales(scales: Any) -> Tuple[Any, Any]:
    """The W4A8 scale split: per row c = 8 * amax_row(s) / 448 (float32) and g = e4m3(s / c).
    ``scales`` bf16 [..., groups]. Returns (c [...], g [..., groups] fp8)."""
    _cpu_only(scales, "scales", "w4a8_split_scales")
    shp = _arrays.shape(scales)
    c = _out(scales, shp[:-1] if len(shp) > 1 else (1,), "F32")
    g = _out(scales, shp, "F8_E4M3")
    _core.w4a8_split_scales(_c(scales), _c(c), _c(g))
    return c, g


# ---- the 128x4 swizzled scale layout ---------------------------------------------------------

def swizzled_shape(rows: int, cols: int) -> Tuple[int, int]:
    """[round_up(rows, 128), round_up(cols, 4)]: the padded shape of swizzled scales."""
    return (-(-int(rows) // 128) * 128, -(-int(cols) // 4) * 4)


def _torch_swizzle(s: Any, inverse: bool, rows: int = 0, cols: int = 0) -> Any:
    torch = _arrays._torch()
    lead = tuple(s.shape[:-2])
    if not inverse:
        rows, cols = int(s.shape[-2]), int(s.shape[-1])
    pr, pc = swizzled_shape(rows, cols)
    if not inverse:
        p = torch.zeros(lead + (pr, pc), dtype=s.dtype, device=s.device)
        p[..., :rows, :cols] = s
        n = len(lead)
        t = p.reshape(lead + (pr // 128, 4, 32, pc // 4, 4))
        t = t.permute(*range(n), n + 0, n + 3, n + 2, n + 1, n + 4)
        return t.contiguous().reshape(lead + (pr, pc))
    n = len(lead)
    t = s.reshape(lead + (pr // 128, pc // 4, 32, 4, 4))
    t = t.permute(*range(n), n + 0, n + 3, n + 2, n + 1, n + 4)
    return t.contiguous().reshape(lead + (pr, pc))[..., :rows, :cols].contiguous()


def swizzle_scales_128x4(scales: Any) -> Any:
    """Flat block scales [..., rows, cols] (1-byte codes: E4M3 for NVFP4, E8M0 for MXFP4) ->
    the 128x4 swizzled layout [..., round_up(rows,128), round_up(cols,4)] (padding bytes 0):
    the byte of (m, k) lives at (m/128)*(kt*512) + (k/4)*512 + (m%32)*16 + ((m%128)/32)*4 + k%4,
    kt = padded cols / 4 (FlashInfer's / CUTLASS's layout, vLLM's ``swizzle_mxfp4_scales``)."""
    shp = _arrays.shape(scales)
    if len(shp) < 2:
        raise invalid_argument("scales", "a [..., rows, cols] matrix", list(shp))
    if _arrays.device(scales)[0] != "cpu":
        if _arrays.framework(scales) == "torch":
            return _torch_swizzle(scales, False)
        raise unsupported("swizzle_scales_128x4 of a non-PyTorch CUDA array: copy it to the host")
    pr, pc = swizzled_shape(shp[-2], shp[-1])
    name = _arrays.dtype_name(scales) or "U8"
    out = _out(scales, shp[:-2] + (pr, pc), name if name in ("U8", "F8_E4M3") else "U8")
    _core.swizzle_scales_128x4(_c(scales), _c(out), False)
    return out


def unswizzle_scales_128x4(swizzled: Any, rows: int, cols: int) -> Any:
    """The inverse of :func:`swizzle_scales_128x4`: [..., rows, cols] flat scales."""
    shp = _arrays.shape(swizzled)
    pr, pc = swizzled_shape(rows, cols)
    if len(shp) < 2 or shp[-2:] != (pr, pc):
        numel = _arrays.numel(swizzled)
        lead = shp[:-2] if len(shp) >= 2 else ()
        per = pr * pc
        if numel % per != 0:
            raise invalid_argument("swizzled", "shape [..., %d, %d] (or that many bytes per matrix)" % (pr, pc), list(shp))
        swizzled = _arrays.reshape(swizzled, (numel // per, pr, pc) if numel != per else (pr, pc))
        shp = _arrays.shape(swizzled)
        del lead
    if _arrays.device(swizzled)[0] != "cpu":
        if _arrays.framework(swizzled) == "torch":
            return _torch_swizzle(swizzled, True, int(rows), int(cols))
        raise unsupported("unswizzle_scales_128x4 of a non-PyTorch CUDA array: copy it to the host")
    name = _arrays.dtype_name(swizzled) or "U8"
    out = _out(swizzled, shp[:-2] + (int(rows), int(cols)), name if name in ("U8", "F8_E4M3") else "U8")
    _core.swizzle_scales_128x4(_c(swizzled), _c(out), True)
    return out


# ---- codecs -------------------------------------------------------------------------------------

def encode(x: Any, format: str) -> Any:
    """float values -> raw bits (CPU): ``bf16`` / ``fp16`` (uint16), ``e4m3`` / ``e5m2`` (uint8),
    ``e2m1`` (packed uint8, two per byte, element 2i in the low nibble). Round to nearest even,
    saturating, bit-exact with CUDA's conversions."""
    _cpu_only(x, "x", "encode")
    shp = _arrays.shape(x)
    if format in ("bf16", "fp16"):
        out = _out(x, shp, "BF16" if format == "bf16" else "F16")
    elif format == "e2m1":
        out = _out(x, shp[:-1] + (shp[-1] // 2,), "U8")
    else:
        out = _out(x, shp, "U8")
    _core.encode(_c(x), _c(out), format)
    return out


def decode(bits: Any, format: str, shape: Optional[Tuple[int, ...]] = None) -> Any:
    """raw bits -> float32 (CPU): ``bf16``, ``fp16``, ``e4m3``, ``e5m2``, ``e8m0``, ``e2m1``
    (packed: the result has twice the last dimension unless ``shape`` is given)."""
    _cpu_only(bits, "bits", "decode")
    shp = _arrays.shape(bits)
    if shape is None:
        shape = shp[:-1] + (shp[-1] * 2,) if format == "e2m1" else shp
    out = _out(bits, shape, "F32")
    _core.decode(_c(bits), _c(out), format)
    return out


# ---- layer builder and files (CPU, NumPy) -------------------------------------------------------

def _config_dict(config: Union[LayerConfig, str, Mapping[str, Any]]) -> Dict[str, Any]:
    return LayerConfig.coerce(config).to_dict()


def _unpack(tensors: Dict[str, Tuple[Any, str]]) -> Dict[str, Any]:
    return {name: arr for name, (arr, _dt) in tensors.items()}


def random_float_layer(config: Union[LayerConfig, str, Mapping[str, Any]], num_experts: int, hidden: int, inter: int,
                       seed: int = 0, with_bias: bool = False, weight_std: float = 0.05) -> Dict[str, Any]:
    """Deterministic random float32 weights (the library's test/demo generator): a dict with
    ``w13`` [E, 2N or N, K], ``w2`` [E, K, N] and, with ``with_bias``, ``w13_bias`` / ``w2_bias``.
    Only the activation (gated or not) of ``config`` matters."""
    return dict(_core.random_float_layer(_config_dict(config), int(num_experts), int(hidden), int(inter),
                                         int(seed), bool(with_bias), float(weight_std)))


def quantize_layer(
    config: Union[LayerConfig, str, Mapping[str, Any]],
    w13: Any,
    w2: Any,
    w13_bias: Any = None,
    w2_bias: Any = None,
    *,
    format: Optional[str] = None,
    act_dtype: str = "bf16",
    mxfp4_rounding: str = "nvidia",
    fp8_w13_input_scale: float = 0.0,
    fp8_w2_input_scale: float = 0.0,
    nvfp4_w13_act_amax: float = 0.0,
    nvfp4_w2_act_amax: float = 0.0,
    threads: int = 0,
) -> Tuple[LayerConfig, Dict[str, Any]]:
    """Encodes float weights into a format with the recipes of ``fusedmoe quantize``
    (docs/NUMERICS.md). Returns (config, weights): NumPy arrays named as in the layer file
    contract (bf16 and fp8 tensors as raw uint16 / uint8 bits), ready for :class:`MoELayer`.
    ``format`` defaults to ``config.format``; fp8-tensor static input scales (<= 0: dynamic) and
    the nvfp4 W4A4 calibration amax values are stored as the contract says."""
    cfg = LayerConfig.coerce(config)
    fmt = format or cfg.format
    for name, arr in (("w13", w13), ("w2", w2), ("w13_bias", w13_bias), ("w2_bias", w2_bias)):
        if arr is not None:
            _cpu_only(arr, name, "quantize_layer")
    out_cfg, tensors = _core.quantize_layer(cfg.to_dict(), _c(w13), _c(w2), _c(w13_bias), _c(w2_bias), fmt, act_dtype,
                                            mxfp4_rounding, float(fp8_w13_input_scale), float(fp8_w2_input_scale),
                                            float(nvfp4_w13_act_amax), float(nvfp4_w2_act_amax), int(threads))
    return LayerConfig.from_core(out_cfg), _unpack(tensors)


def dequantize_layer(config: Union[LayerConfig, str, Mapping[str, Any]], weights: Mapping[str, Any]) -> Dict[str, Any]:
    """Float32 weights of a layer in any format (CPU): ``w13``, ``w2`` (+ biases)."""
    for name, arr in weights.items():
        if arr is not None:
            _cpu_only(arr, name, "dequantize_layer")
    args = {k: _c(v) for k, v in weights.items() if v is not None}
    return dict(_core.dequantize_layer(_config_dict(config), args))


def read_layer_file(path: str) -> Tuple[LayerConfig, Dict[str, Any]]:
    """Reads a layer file (docs/LAYER_FILE.md): (config, NumPy weights)."""
    cfg, tensors = _core.read_layer_file(str(path))
    return LayerConfig.from_core(cfg), _unpack(tensors)


def write_layer_file(path: str, config: Union[LayerConfig, str, Mapping[str, Any]], weights: Mapping[str, Any]) -> None:
    """Writes a layer file (validated against the contract first; CPU arrays)."""
    for name, arr in weights.items():
        if arr is not None:
            _cpu_only(arr, name, "write_layer_file")
    args = {k: _c(v) for k, v in weights.items() if v is not None}
    _core.write_layer_file(str(path), _config_dict(config), args)


def workspace_size(layer: Any, max_tokens: int, topk: int) -> int:
    """Bytes of device workspace ``layer`` (a :class:`MoELayer`) needs for ``max_tokens`` tokens."""
    return int(layer.workspace_size(max_tokens, topk))
