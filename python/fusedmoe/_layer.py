"""The layer: :class:`LayerConfig`, :class:`MoELayer` (one per weight set) and the functional
:func:`fused_moe` (a cache of MoELayer objects keyed by the weights' memory)."""

from __future__ import annotations

import atexit
import collections
import dataclasses
import os
import threading
from typing import Any, Callable, Dict, Hashable, Iterable, Mapping, NamedTuple, Optional, Tuple, Union

from . import _arrays, _core
from ._errors import invalid_argument

__all__ = [
    "WEIGHT_NAMES",
    "LayerConfig",
    "MoELayer",
    "Support",
    "fused_moe",
    "get_layer",
    "clear_layer_cache",
    "set_layer_cache_size",
]

#: Weight tensor names, as in the layer file contract (docs/LAYER_FILE.md).
WEIGHT_NAMES: Tuple[str, ...] = (
    "w13_weight", "w2_weight", "w13_weight_scale", "w2_weight_scale", "w13_weight_scale_2",
    "w2_weight_scale_2", "w13_input_scale", "w2_input_scale", "w13_bias", "w2_bias",
)


@dataclasses.dataclass(frozen=True)
class LayerConfig:
    """What a layer is (the C++ ``fusedmoe::LayerConfig``; spellings of the layer file contract).

    Attributes:
        format: ``bf16``, ``fp16``, ``fp32``, ``fp8-tensor``, ``fp8-channel``, ``fp8-block``,
            ``w4a8-int4``, ``mxfp4`` or ``nvfp4``.
        activation: ``silu``, ``gelu``, ``gelu_tanh``, ``relu2`` (non-gated) or ``swigluoai``.
        gate_up_order: ``gate_up`` (first half of w13 is the gate: vLLM) or ``up_gate``
            (FlashInfer / TensorRT-LLM).
        interleaved: gate and up rows alternate (any gated activation; vLLM's gpt-oss layout).
            Either layout runs the activation inside GEMM1 on the GPU at large batches (bf16 and
            static fp8-tensor; halves need an even N and half a w13 row of 16-byte multiples).
        swiglu_alpha, swiglu_limit: ``swigluoai`` parameters.
        act_dtype: activation operand of ``mxfp4`` (``bf16`` or ``fp8``) and ``nvfp4``
            (``bf16`` or ``nvfp4`` = W4A4).
        fp8_block_ue8m0: ``fp8-block`` activation scales rounded up to powers of two.
        weight_scale_layout: ``linear`` or ``swizzled_128x4`` (``mxfp4`` / ``nvfp4`` block scales).
        int4_encoding: ``signed`` or ``uint4b8`` (``w4a8-int4`` weights stored as q + 8).
    """

    format: str
    activation: str = "silu"
    gate_up_order: str = "gate_up"
    interleaved: bool = False
    swiglu_alpha: float = 1.702
    swiglu_limit: float = 7.0
    act_dtype: str = "bf16"
    fp8_block_ue8m0: bool = False
    weight_scale_layout: str = "linear"
    int4_encoding: str = "signed"

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @staticmethod
    def from_core(d: Mapping[str, Any]) -> "LayerConfig":
        """From the core's dict (float32 parameters shown with 7 significant digits)."""
        d = dict(d)
        for key in ("swiglu_alpha", "swiglu_limit"):
            d[key] = float("%.7g" % d[key])
        return LayerConfig(**d)

    @staticmethod
    def coerce(config: Union["LayerConfig", str, Mapping[str, Any]]) -> "LayerConfig":
        """A LayerConfig from a LayerConfig, a format name or a dict of fields."""
        if isinstance(config, LayerConfig):
            return config
        if isinstance(config, str):
            return LayerConfig(format=config)
        if isinstance(config, Mapping):
            names = {f.name for f in dataclasses.fields(LayerConfig)}
            unknown = [k for k in config if k not in names]
            if unknown:
                raise invalid_argument("config", "fields of LayerConfig (%s)" % ", ".join(sorted(names)), repr(unknown[0]))
            return LayerConfig(**config)
        raise invalid_argument("config", "a LayerConfig, a format name or a dict", type(config).__name__)


class Support(NamedTuple):
    """Whether a backend can run a problem (``Layer::can_implement``); ``reason`` says why not."""

    ok: bool
    reason: str


class MoELayer:
    """One MoE expert layer over a fixed weight set: validated and prepared once, run per batch.

    The weights are any DLPack arrays (PyTorch, CuPy, JAX, NumPy) named as in the layer file
    contract (``w13_weight``, ``w2_weight``, ``w13_weight_scale``, ...); they are viewed, not
    copied, and kept alive by the layer. NumPy has no bf16 / fp8 dtypes: pass their raw bits as
    uint16 / uint8 arrays (the format fixes the dtype of every weight tensor).

    The backend follows the weights' device (``backend="auto"``): CPU arrays run on the CPU
    backend, CUDA arrays on the CUDA backend (Hopper). A format or problem the chosen backend
    cannot do raises :class:`fusedmoe.Unsupported` with the backend's reason, never a fallback.

    Args:
        config: a :class:`LayerConfig`, a format name (other fields default) or a dict of fields.
        weights: mapping of weight name to array; keyword arguments are merged in.
        backend: ``auto``, ``cpu`` or ``cuda``.
        cpu_threads: CPU backend threads (0 = all cores).
        cpu_precision: ``fast`` (fp32 accumulation) or ``oracle`` (the float64 oracle).

    Raises:
        InvalidArgument: a weight has the wrong name, dtype, shape, strides or device (the message
            names it, with the expected and actual value).
        Unsupported: the backend is not built in (e.g. CUDA weights with a CPU-only build).
    """

    def __init__(
        self,
        config: Union[LayerConfig, str, Mapping[str, Any]],
        weights: Optional[Mapping[str, Any]] = None,
        *,
        backend: str = "auto",
        cpu_threads: int = 0,
        cpu_precision: str = "fast",
        **named_weights: Any,
    ) -> None:
        cfg = LayerConfig.coerce(config)
        merged: Dict[str, Any] = dict(weights or {})
        merged.update(named_weights)
        for name in merged:
            if name not in WEIGHT_NAMES:
                raise invalid_argument("weights", "names from the layer file contract (%s)" % ", ".join(WEIGHT_NAMES), repr(name))
        self._weights = {k: v for k, v in merged.items() if v is not None}
        args = {k: _arrays.core_arg(v) for k, v in self._weights.items()}
        self._core = _core.Layer(args, cfg.to_dict(), backend, int(cpu_threads), cpu_precision)
        self._config = LayerConfig.from_core(self._core.config)
        self._ref = self._weights["w13_weight"]

    # ---- properties ----
    @property
    def config(self) -> LayerConfig:
        return self._config

    @property
    def backend(self) -> str:
        """The resolved backend: ``cpu`` or ``cuda``."""
        return self._core.backend

    @property
    def device(self) -> Tuple[str, int]:
        """Device of the weights: ``("cpu", 0)`` or ``("cuda", index)``."""
        return tuple(self._core.device)

    @property
    def num_experts(self) -> int:
        return self._core.num_experts

    @property
    def hidden(self) -> int:
        return self._core.hidden

    @property
    def inter(self) -> int:
        return self._core.inter

    @property
    def weights(self) -> Dict[str, Any]:
        return dict(self._weights)

    def __repr__(self) -> str:
        return "MoELayer(%s, E=%d, K=%d, N=%d, backend=%s)" % (
            self._config.format, self.num_experts, self.hidden, self.inter, self.backend)

    # ---- queries ----
    def workspace_size(self, max_tokens: int, topk: int) -> int:
        """Bytes of device workspace a run of up to ``max_tokens`` tokens needs (0 on the CPU)."""
        return int(self._core.workspace_size(int(max_tokens), int(topk)))

    def masked_workspace_size(self, max_tokens_per_expert: int) -> int:
        """Bytes of device workspace :meth:`run_masked` needs for ``T = max_tokens_per_expert`` rows
        per expert (0 on the CPU)."""
        return int(self._core.masked_workspace_size(int(max_tokens_per_expert)))

    def can_implement(self, num_tokens: int, topk: int, num_global_experts: Optional[int] = None) -> Support:
        """Whether the backend can run this problem, and why not (never runs anything)."""
        ok, reason = self._core.can_implement(int(num_tokens), int(topk), int(num_global_experts or 0))
        return Support(bool(ok), reason)

    def can_implement_masked(self, max_tokens_per_expert: int, prequantized: bool = False) -> Support:
        """Whether the backend can run :meth:`run_masked` with ``T`` rows per expert (``prequantized``:
        F8_E4M3 codes with scales), and why not (never runs anything)."""
        ok, reason = self._core.can_implement_masked(int(max_tokens_per_expert), bool(prequantized))
        return Support(bool(ok), reason)

    # ---- running ----
    def __call__(
        self,
        hidden_states: Any,
        topk_ids: Any,
        topk_weights: Any,
        *,
        expert_map: Any = None,
        apply_router_weight_on_input: bool = False,
        output: Any = None,
        workspace: Any = None,
        stream: Optional[int] = None,
        hidden_states_scale: Any = None,
        out_dtype: Optional[Any] = None,
    ) -> Any:
        """Runs the layer: ``out[t] = sum_k topk_weights[t,k] * expert(topk_ids[t,k])(x[t])``.

        Args:
            hidden_states: [M, K] float32 / float16 / bfloat16 (the output has the same dtype); or,
                with format ``fp8-block`` only, F8_E4M3 codes already quantised per token and group
                of 128 along K (as DeepGEMM takes them: torch ``float8_e4m3fn``, ml_dtypes
                ``float8_e4m3fn``, ``as_dtype(a, "fp8")``, or raw ``uint8`` codes) together with
                ``hidden_states_scale``.
            topk_ids: [M, topk] int32 (int64 is converted); ids outside [0, E_global) select nothing.
            topk_weights: [M, topk] float32 (bf16 / fp16 are converted).
            expert_map: optional [E_global] int32: global expert id -> local id or -1.
            apply_router_weight_on_input: scale x by the router weight before GEMM1 (any topk; not
                with pre-quantised inputs).
            output: optional [M, K] array to write (else a new array of the input's framework).
            workspace: optional device workspace of at least ``workspace_size(M, topk)`` bytes
                (else allocated with the input's framework, e.g. ``torch.empty`` on its device).
            stream: CUDA stream handle (else the framework's current stream: torch and CuPy;
                0, the legacy default stream, for others). Never synchronised.
            hidden_states_scale: pre-quantised inputs only: float32 [M, ceil(K/128)] row-major,
                contiguous (``quantize_fp8_per_token_group``'s layout; DeepGEMM's column-major,
                TMA-aligned scales must be transposed first). The GEMM1 operand is
                ``e4m3(q[t, k]) * s[t, k // 128]``, never re-quantised (docs/NUMERICS.md).
            out_dtype: the output dtype when ``output`` is not given (``bf16``, ``fp16``, ``fp32``
                or a framework dtype). Required with pre-quantised inputs, where it is also the
                activation dtype (``bf16`` is what DeepGEMM / vLLM use); otherwise it must be the
                dtype of ``hidden_states``.

        Returns:
            ``output``.
        """
        return self._run(hidden_states, topk_ids, topk_weights, expert_map, apply_router_weight_on_input,
                         output, workspace, stream, timed=False, x_scale=hidden_states_scale,
                         out_dtype=out_dtype)[0]

    run = __call__

    def run_timed(self, hidden_states: Any, topk_ids: Any, topk_weights: Any, **kwargs: Any) -> Tuple[Any, Dict[str, float]]:
        """:meth:`__call__` with a timer between the stages; returns ``(output, stage_times_ms)``.
        Synchronises the stream (not graph-capturable)."""
        return self._run(hidden_states, topk_ids, topk_weights, kwargs.pop("expert_map", None),
                         kwargs.pop("apply_router_weight_on_input", False), kwargs.pop("output", None),
                         kwargs.pop("workspace", None), kwargs.pop("stream", None), timed=True,
                         x_scale=kwargs.pop("hidden_states_scale", None), out_dtype=kwargs.pop("out_dtype", None),
                         extra=kwargs)

    def _run(self, x, ids, w, expert_map, on_input, output, workspace, stream, timed, x_scale=None, out_dtype=None,
             extra=None):
        if extra:
            raise TypeError("unexpected keyword argument %r" % next(iter(extra)))
        for arg, name in ((x, "hidden_states"), (ids, "topk_ids"), (w, "topk_weights")):
            _arrays.require_array(arg, name)
        x = _fp8_codes(x, x_scale)
        ids = _arrays.as_int32_ids(ids)
        w = _arrays.as_f32_weights(w)
        xshape = _arrays.shape(x)
        if output is None:
            if len(xshape) != 2:
                raise invalid_argument("hidden_states", "a [M, K] array", "shape %s" % list(xshape))
            output = _arrays.empty(x, xshape, _output_dtype(x, out_dtype))
        elif out_dtype is not None:
            _check_out_dtype(output, out_dtype)
        is_cuda = self._core.backend == "cuda"
        if is_cuda and _arrays.device(x) == self.device:
            # (hidden_states elsewhere: no workspace "like" them, the core refuses the call.)
            if workspace is None and len(xshape) == 2:
                ishape = _arrays.shape(ids)
                need = self.workspace_size(xshape[0], ishape[1] if len(ishape) == 2 else 1)
                if need > 0:
                    workspace = _arrays.empty(x, (need,), "U8")
            if stream is None:
                stream = _arrays.current_stream(x)
        raw = _arrays.framework(x) == "torch"
        res = self._core.run(
            _arrays.core_arg(x, raw), _arrays.core_arg(ids, raw), _arrays.core_arg(w, raw),
            _arrays.core_arg(output, raw), _arrays.core_arg(expert_map, raw), bool(on_input),
            _arrays.core_arg(workspace, raw), stream, timed, _arrays.core_arg(x_scale, raw))
        return output, res

    def run_masked(
        self,
        hidden_states: Any,
        expert_num_tokens: Any,
        output: Any = None,
        hidden_states_scale: Any = None,
        workspace: Any = None,
        stream: Optional[int] = None,
        *,
        out_dtype: Optional[Any] = None,
    ) -> Any:
        """Runs the batched ("masked") expert-parallel layout (vLLM's CutlassBatchedExpertsFp8,
        DeepGEMM's masked grouped GEMM): rows already grouped by local expert.

        ``output[e, t] = W2[e] act(W1[e] hidden_states[e, t] + b1[e]) + b2[e]`` for
        ``t < expert_num_tokens[e]`` (no routing weight: the caller combines); rows past the count
        are written with zeros and never read. Numerically the contiguous layer over the valid rows
        with top-1 routing and weight 1, bit for bit (docs/NUMERICS.md). On CUDA the counts stay on
        the device (no host sync, graph capturable).

        Args:
            hidden_states: [E, T, K] float32 / float16 / bfloat16, or (``fp8-block`` only) F8_E4M3
                codes with ``hidden_states_scale``; E = the layer's (local) experts.
            expert_num_tokens: [E] int32 (int64 is converted) valid rows per expert, on the layer's
                device; clamped to [0, T].
            output: optional [E, T, K] array (else a new one of the input's framework): the dtype of
                ``hidden_states``, or float32 / float16 / bfloat16 with pre-quantised inputs.
            hidden_states_scale: pre-quantised inputs: float32 [E, T, ceil(K/128)] row-major.
            workspace: optional device workspace of ``masked_workspace_size(T)`` bytes (else
                allocated with the input's framework).
            stream: CUDA stream handle (else the framework's current stream).
            out_dtype: as in :meth:`__call__` (required with pre-quantised inputs and no ``output``).

        Returns:
            ``output``.
        """
        for arg, name in ((hidden_states, "hidden_states"), (expert_num_tokens, "expert_num_tokens")):
            _arrays.require_array(arg, name)
        x = _fp8_codes(hidden_states, hidden_states_scale)
        counts = _arrays.as_int32_ids(expert_num_tokens)
        xshape = _arrays.shape(x)
        if output is None:
            if len(xshape) != 3:
                raise invalid_argument("hidden_states", "an [E, T, K] array", "shape %s" % list(xshape))
            output = _arrays.empty(x, xshape, _output_dtype(x, out_dtype))
        elif out_dtype is not None:
            _check_out_dtype(output, out_dtype)
        if self._core.backend == "cuda" and _arrays.device(x) == self.device:
            if workspace is None and len(xshape) == 3:
                need = self.masked_workspace_size(xshape[1])
                if need > 0:
                    workspace = _arrays.empty(x, (need,), "U8")
            if stream is None:
                stream = _arrays.current_stream(x)
        raw = _arrays.framework(x) == "torch"
        self._core.run_masked(_arrays.core_arg(x, raw), _arrays.core_arg(counts, raw), _arrays.core_arg(output, raw),
                              _arrays.core_arg(hidden_states_scale, raw), _arrays.core_arg(workspace, raw), stream)
        return output

    def warmup(self, max_tokens: int, topk: int, stream: Optional[int] = None) -> None:
        """Prepares everything :meth:`__call__` and :meth:`run_masked` use for 1..``max_tokens``
        tokens with this ``topk`` (C++ ``Layer::warmup``), so the first real call has no extra
        latency: on CUDA it runs the layer on zero-filled scratch inputs for 1, 2, 4, ... and
        ``max_tokens`` tokens (plain, pre-quantised for fp8-block, and masked), which loads every
        kernel module and tile config the range selects. It allocates and frees scratch device
        memory and synchronises ``stream`` (default: the framework's current stream of the
        weights' device): call it outside CUDA-graph capture, e.g. right after building the layer.
        CPU backend: a no-op (after checking the arguments).

        Raises:
            InvalidArgument: ``max_tokens < 0`` or ``topk < 1``.
            Unsupported: the backend cannot run ``max_tokens`` tokens with this ``topk``.
        """
        if stream is None and self._core.backend == "cuda":
            stream = _arrays.current_stream(self._ref)
        self._core.warmup(int(max_tokens), int(topk), stream)


def _fp8_codes(x: Any, x_scale: Any) -> Any:
    """With scales, raw uint8 hidden states are F8_E4M3 codes (NumPy has no float8 dtype)."""
    if x_scale is not None and not isinstance(x, _arrays.Typed) and _arrays.dtype_name(x) == "U8":
        return _arrays.Typed(x, "F8_E4M3")
    return x


def _dtype_arg(dtype: Any) -> Optional[str]:
    """A fusedmoe dtype name from a name or a framework dtype (torch / NumPy / ml_dtypes)."""
    if dtype is None:
        return None
    if isinstance(dtype, str):
        name = dtype
    elif isinstance(dtype, type):  # np.float32, ml_dtypes.bfloat16
        name = dtype.__name__
    else:
        name = str(getattr(dtype, "name", None) or dtype).replace("torch.", "")
    try:
        return _arrays._canonical_dtype(name)
    except ValueError:
        raise invalid_argument("out_dtype", "bf16, fp16 or fp32 (a name or a framework dtype)", repr(dtype)) from None


def _output_dtype(x: Any, out_dtype: Any) -> str:
    """The dtype of a new output for hidden states ``x`` (checks ``out_dtype``)."""
    xdt = _arrays.dtype_name(x)
    want = _dtype_arg(out_dtype)
    if xdt == "F8_E4M3":
        if want is None:
            raise invalid_argument("out_dtype", "the output (and activation) dtype, bf16, fp16 or fp32, with "
                                   "pre-quantised F8_E4M3 hidden_states (or pass output=)", "None")
        if want not in ("F32", "F16", "BF16"):
            raise invalid_argument("out_dtype", "bf16, fp16 or fp32", want)
        return want
    if xdt not in ("F32", "F16", "BF16"):
        raise invalid_argument("hidden_states", "a float32, float16 or bfloat16 array (or F8_E4M3 codes with "
                               "hidden_states_scale, format fp8-block)",
                               xdt or str(getattr(x, "dtype", type(x).__name__)))
    if want is not None and want != xdt:
        raise invalid_argument("out_dtype", "%s (the dtype of hidden_states; only pre-quantised F8_E4M3 inputs "
                               "take another output dtype)" % xdt, want)
    return xdt


def _check_out_dtype(output: Any, out_dtype: Any) -> None:
    want = _dtype_arg(out_dtype)
    have = _arrays.dtype_name(output)
    if have is not None and want != have:
        raise invalid_argument("out_dtype", "the dtype of output (%s) when both are given" % have, want)


# ---------------------------------------------------------------------------------------------
# A cache of MoELayer objects keyed by the weights' memory (used by fused_moe, the seeds'
# drop-ins, the torch op and the vLLM experts class).

_cache_lock = threading.Lock()
_cache: "collections.OrderedDict[Hashable, Tuple[Any, Tuple[Any, ...]]]" = collections.OrderedDict()
_cache_size = int(os.environ.get("FUSEDMOE_LAYER_CACHE_SIZE", "256"))


def set_layer_cache_size(n: int) -> None:
    """How many layers :func:`fused_moe` and the drop-ins keep (LRU; default 256, or the
    ``FUSEDMOE_LAYER_CACHE_SIZE`` environment variable). Use at least the model's MoE layer count."""
    global _cache_size
    with _cache_lock:
        _cache_size = max(0, int(n))
        while len(_cache) > _cache_size:
            _cache.popitem(last=False)


def clear_layer_cache() -> None:
    """Drops every cached layer (and the references that keep its weights alive). Call it after
    changing weights in place, or to free the memory of weights a deleted model held."""
    with _cache_lock:
        _cache.clear()


# Drop the cached layers before the interpreter tears the extension module down.
atexit.register(clear_layer_cache)


def get_layer(key: Hashable, build: Callable[[], Any], refs: Iterable[Any] = ()) -> Any:
    """The cached object for ``key``, or ``build()``'s, cached with strong references to ``refs``
    (the arrays the key was made from: while cached, their memory cannot be reused, so a key of
    data pointers cannot name other data)."""
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit[0]
    layer = build()
    with _cache_lock:
        if _cache_size > 0:
            _cache[key] = (layer, tuple(refs))
            _cache.move_to_end(key)
            while len(_cache) > _cache_size:
                _cache.popitem(last=False)
    return layer


def weights_key(weights: Mapping[str, Any]) -> Tuple:
    return tuple(sorted((k, _arrays.identity(v)) for k, v in weights.items() if v is not None))


def cached_layer(config: LayerConfig, weights: Mapping[str, Any], backend: str = "auto", cpu_threads: int = 0,
                 cpu_precision: str = "fast") -> MoELayer:
    """The cached :class:`MoELayer` for these weights and config (built on first use)."""
    weights = {k: v for k, v in weights.items() if v is not None}
    key = ("layer", config, backend, int(cpu_threads), cpu_precision, weights_key(weights))
    return get_layer(key, lambda: MoELayer(config, weights, backend=backend, cpu_threads=cpu_threads,
                                           cpu_precision=cpu_precision), refs=weights.values())


def fused_moe(
    hidden_states: Any,
    w13_weight: Any,
    w2_weight: Any,
    topk_weights: Any,
    topk_ids: Any,
    *,
    format: Optional[str] = None,
    activation: str = "silu",
    gate_up_order: str = "gate_up",
    interleaved: bool = False,
    swiglu_alpha: float = 1.702,
    swiglu_limit: float = 7.0,
    act_dtype: str = "bf16",
    fp8_block_ue8m0: bool = False,
    weight_scale_layout: str = "linear",
    int4_encoding: str = "signed",
    w13_weight_scale: Any = None,
    w2_weight_scale: Any = None,
    w13_weight_scale_2: Any = None,
    w2_weight_scale_2: Any = None,
    w13_input_scale: Any = None,
    w2_input_scale: Any = None,
    w13_bias: Any = None,
    w2_bias: Any = None,
    expert_map: Any = None,
    apply_router_weight_on_input: bool = False,
    output: Any = None,
    workspace: Any = None,
    stream: Optional[int] = None,
    backend: str = "auto",
    cpu_threads: int = 0,
    cpu_precision: str = "fast",
    hidden_states_scale: Any = None,
    out_dtype: Optional[Any] = None,
) -> Any:
    """The whole MoE expert layer in one call (functional form of :class:`MoELayer`).

    ``out[t] = sum_k topk_weights[t,k] * W2[e] act(W1[e] x[t] + b1[e]) + b2[e]`` with
    ``e = topk_ids[t,k]``, in any format; arguments as in :class:`MoELayer` and :class:`LayerConfig`.
    ``format`` may be left out for unquantised weights (taken from the weight dtype).
    Pre-quantised ``fp8-block`` inputs: F8_E4M3 ``hidden_states`` with ``hidden_states_scale``
    [M, ceil(K/128)] and ``out_dtype`` (or ``output``), as in :meth:`MoELayer.__call__`.

    Cost: a layer is validated and prepared once per weight set, then cached (keyed by the
    weights' data pointers, shapes, strides and dtypes, holding references to them): repeated
    calls with the same weights only pay a dictionary lookup. After changing weights *in place*
    call :func:`clear_layer_cache`. Hold a :class:`MoELayer` yourself to avoid the lookup.
    """
    if format is None:
        format = {"BF16": "bf16", "F16": "fp16", "F32": "fp32"}.get(_arrays.dtype_name(w13_weight) or "")
        if format is None:
            raise invalid_argument("format", "a format name (required for quantised weights)", "None")
    cfg = LayerConfig(format=format, activation=activation, gate_up_order=gate_up_order, interleaved=interleaved,
                      swiglu_alpha=float(swiglu_alpha), swiglu_limit=float(swiglu_limit), act_dtype=act_dtype,
                      fp8_block_ue8m0=fp8_block_ue8m0, weight_scale_layout=weight_scale_layout,
                      int4_encoding=int4_encoding)
    weights = dict(w13_weight=w13_weight, w2_weight=w2_weight, w13_weight_scale=w13_weight_scale,
                   w2_weight_scale=w2_weight_scale, w13_weight_scale_2=w13_weight_scale_2,
                   w2_weight_scale_2=w2_weight_scale_2, w13_input_scale=w13_input_scale,
                   w2_input_scale=w2_input_scale, w13_bias=w13_bias, w2_bias=w2_bias)
    layer = cached_layer(cfg, weights, backend, cpu_threads, cpu_precision)
    return layer(hidden_states, topk_ids, topk_weights, expert_map=expert_map,
                 apply_router_weight_on_input=apply_router_weight_on_input, output=output, workspace=workspace,
                 stream=stream, hidden_states_scale=hidden_states_scale, out_dtype=out_dtype)
