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
        interleaved: gate and up rows alternate (``swigluoai`` only, vLLM's gpt-oss layout).
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

    def can_implement(self, num_tokens: int, topk: int, num_global_experts: Optional[int] = None) -> Support:
        """Whether the backend can run this problem, and why not (never runs anything)."""
        ok, reason = self._core.can_implement(int(num_tokens), int(topk), int(num_global_experts or 0))
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
    ) -> Any:
        """Runs the layer: ``out[t] = sum_k topk_weights[t,k] * expert(topk_ids[t,k])(x[t])``.

        Args:
            hidden_states: [M, K] float32 / float16 / bfloat16 (the output has the same dtype).
            topk_ids: [M, topk] int32 (int64 is converted); ids outside [0, E_global) select nothing.
            topk_weights: [M, topk] float32 (bf16 / fp16 are converted).
            expert_map: optional [E_global] int32: global expert id -> local id or -1.
            apply_router_weight_on_input: scale x by the router weight before GEMM1 (any topk).
            output: optional [M, K] array to write (else a new array of the input's framework).
            workspace: optional device workspace of at least ``workspace_size(M, topk)`` bytes
                (else allocated with the input's framework, e.g. ``torch.empty`` on its device).
            stream: CUDA stream handle (else the framework's current stream: torch and CuPy;
                0, the legacy default stream, for others). Never synchronised.

        Returns:
            ``output``.
        """
        return self._run(hidden_states, topk_ids, topk_weights, expert_map, apply_router_weight_on_input,
                         output, workspace, stream, timed=False)[0]

    run = __call__

    def run_timed(self, hidden_states: Any, topk_ids: Any, topk_weights: Any, **kwargs: Any) -> Tuple[Any, Dict[str, float]]:
        """:meth:`__call__` with a timer between the stages; returns ``(output, stage_times_ms)``.
        Synchronises the stream (not graph-capturable)."""
        return self._run(hidden_states, topk_ids, topk_weights, kwargs.pop("expert_map", None),
                         kwargs.pop("apply_router_weight_on_input", False), kwargs.pop("output", None),
                         kwargs.pop("workspace", None), kwargs.pop("stream", None), timed=True, extra=kwargs)

    def _run(self, x, ids, w, expert_map, on_input, output, workspace, stream, timed, extra=None):
        if extra:
            raise TypeError("unexpected keyword argument %r" % next(iter(extra)))
        for arg, name in ((x, "hidden_states"), (ids, "topk_ids"), (w, "topk_weights")):
            _arrays.require_array(arg, name)
        ids = _arrays.as_int32_ids(ids)
        w = _arrays.as_f32_weights(w)
        xshape = _arrays.shape(x)
        if output is None:
            xdt = _arrays.dtype_name(x)
            if xdt not in ("F32", "F16", "BF16") or len(xshape) != 2:
                raise invalid_argument("hidden_states", "a [M, K] float32, float16 or bfloat16 array",
                                       "%s of shape %s" % (xdt or getattr(x, "dtype", type(x).__name__), list(xshape)))
            output = _arrays.empty(x, xshape, xdt)
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
            _arrays.core_arg(workspace, raw), stream, timed)
        return output, res

    def warmup(self, max_tokens: int, topk: int, dtype: Optional[str] = None, stream: Optional[int] = None) -> None:
        """Runs the layer once on zeros of ``max_tokens`` tokens (every expert selected), so that
        lazy initialisation happens before timing or CUDA-graph capture. Arrays are allocated
        with the weights' framework and device; ``dtype`` of the hidden states defaults to the
        weight dtype for fp16 / fp32 layers and bf16 otherwise."""
        if dtype is None:
            dtype = {"fp16": "F16", "fp32": "F32"}.get(self._config.format, "BF16")
        m, k = int(max_tokens), int(topk)
        ref = self._ref
        x = _arrays.zeros(ref, (m, self.hidden), dtype)
        ids = _arrays.reshape(_arrays.arange_mod(ref, m * k, self.num_experts), (m, k))
        w = _arrays.full(ref, (m, k), 1.0 / k)
        self(x, ids, w, stream=stream)


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
) -> Any:
    """The whole MoE expert layer in one call (functional form of :class:`MoELayer`).

    ``out[t] = sum_k topk_weights[t,k] * W2[e] act(W1[e] x[t] + b1[e]) + b2[e]`` with
    ``e = topk_ids[t,k]``, in any format; arguments as in :class:`MoELayer` and :class:`LayerConfig`.
    ``format`` may be left out for unquantised weights (taken from the weight dtype).

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
                 stream=stream)
