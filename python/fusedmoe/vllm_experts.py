"""An experts class with the shape of vLLM's modular kernel interface
(``FusedMoEPermuteExpertsUnpermute`` / ``FusedMoEExpertsModular``: ``workspace_shapes()`` and
``apply()``), running fusedmoe.

With vLLM installed the class derives from vLLM's base class (whichever of the two names the
installed vLLM has), so ``FusedMoEModularKernel(prepare_finalize, FusedMoEExperts(...))`` works;
without vLLM it is a plain class with the same methods (usable and testable on its own).

fusedmoe quantises activations itself (``expects_unquantized_inputs`` is True: pair it with a
prepare/finalize that does not quantise) and does the weighted top-k reduction itself
(``finalize_weight_and_reduce_impl`` is vLLM's ``TopKWeightAndReduceNoOP``). ``fp8-block`` layers
also take activations already quantised per token and group of 128 (float8_e4m3fn codes +
``a1q_scale`` [M, ceil(K/128)] float32, DeepGemmExperts' inputs), used as given.

:class:`FusedMoEBatchedExperts` is the batched ("masked") expert-parallel variant (the shape of
vLLM's ``CutlassBatchedExpertsFp8`` / ``BatchedDeepGemmExperts``: activation format
``BatchedExperts``): ``hidden_states`` [E, T, K] grouped by local expert with
``expert_tokens_meta.expert_num_tokens`` [E] valid rows each, output [E, T, K] without routing
weights (the prepare/finalize combines them). It runs :meth:`fusedmoe.MoELayer.run_masked`.

The format comes from ``quant_config`` (vLLM's ``FusedMoEQuantConfig`` or
:class:`fusedmoe.seeds.FusedMoEQuantConfig`), or explicitly from ``format=``:

===========================================  ==========================================
quant_config                                  fusedmoe format
===========================================  ==========================================
``quant_dtype`` None                          bf16 / fp16 / fp32 from the weight dtype
float8_e4m3fn, ``block_shape`` [128, 128]     fp8-block
float8_e4m3fn, per-token activations          fp8-channel (per-tensor weight scales broadcast)
float8_e4m3fn                                 fp8-tensor (``a1_scale`` / ``a2_scale`` static)
``"nvfp4"``                                   nvfp4, W4A4 (``a1_gscale``, ``g1_alphas``, swizzled
                                              or linear ``w1_scale``)
``"mxfp4"``                                   mxfp4 (``w1_scale`` E8M0), bf16 activations
===========================================  ==========================================
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

from . import _arrays
from . import _tensor_math as tm
from . import seeds as _seeds
from ._errors import invalid_argument, unsupported
from ._layer import LayerConfig, MoELayer, get_layer

__all__ = ["FusedMoEExperts", "FusedMoEBatchedExperts"]


def _vllm_base():
    try:
        from vllm.model_executor.layers.fused_moe import modular_kernel as mk  # noqa: PLC0415
    except Exception:  # noqa: BLE001 - vLLM absent or broken: a plain class
        return object, None
    for name in ("FusedMoEExpertsModular", "FusedMoEPermuteExpertsUnpermute"):
        base = getattr(mk, name, None)
        if base is not None:
            return base, mk
    return object, mk


_Base, _mk = _vllm_base()


def _quant_dtype_name(qd: Any) -> Optional[str]:
    if qd is None:
        return None
    if isinstance(qd, str):
        return qd.lower()
    return str(qd).replace("torch.", "").lower()


class FusedMoEExperts(_Base):  # type: ignore[misc, valid-type]
    """fusedmoe as a vLLM modular-kernel experts implementation.

    Args:
        moe_config: vLLM's ``FusedMoEConfig`` (optional; unused beyond what vLLM's base reads).
        quant_config: the quantisation and its scales (see the module docstring); None = unquantised.
        format: a fusedmoe format overriding the one derived from ``quant_config``.
        gate_up_order: ``gate_up`` (vLLM's weights, the default) or ``up_gate``.
        mxfp4_act_dtype: activations of mxfp4 layers, ``bf16`` or ``fp8``.
        use_ue8m0: fp8-block activation scales rounded up to powers of two.
    """

    def __init__(self, moe_config: Any = None, quant_config: Any = None, *, format: Optional[str] = None,
                 gate_up_order: str = "gate_up", mxfp4_act_dtype: str = "bf16", use_ue8m0: bool = False) -> None:
        if quant_config is None:
            quant_config = _seeds.FusedMoEQuantConfig()
        if _Base is not object:
            try:
                super().__init__(moe_config, quant_config)
            except TypeError:
                super().__init__(quant_config)
        self.moe_config = moe_config
        self._qc = quant_config
        self._format = format
        self._gate_up_order = gate_up_order
        self._mxfp4_act_dtype = mxfp4_act_dtype
        self._use_ue8m0 = bool(use_ue8m0)

    # ---- capabilities (vLLM's interface) ----
    @property
    def activation_formats(self) -> Tuple[Any, Any]:
        if _mk is not None and hasattr(_mk, "FusedMoEActivationFormat"):
            std = _mk.FusedMoEActivationFormat.Standard
            return (std, std)
        return ("standard", "standard")

    @staticmethod
    def activation_format() -> Any:
        if _mk is not None and hasattr(_mk, "FusedMoEActivationFormat"):
            return _mk.FusedMoEActivationFormat.Standard
        return "standard"

    @staticmethod
    def expects_unquantized_inputs(moe_config: Any = None, quant_config: Any = None) -> bool:
        return True

    @staticmethod
    def _supports_current_device() -> bool:
        return True

    @staticmethod
    def _supports_no_act_and_mul() -> bool:
        return True

    @staticmethod
    def _supports_quant_scheme(weight_key: Any, activation_key: Any) -> bool:
        return True

    @staticmethod
    def _supports_activation(activation: Any) -> bool:
        try:
            _seeds.vllm_activation(activation)
        except NotImplementedError:
            return False
        return True

    @staticmethod
    def _supports_parallel_config(moe_parallel_config: Any) -> bool:
        return True

    def supports_chunking(self) -> bool:
        return True

    def supports_expert_map(self) -> bool:
        return True

    def finalize_weight_and_reduce_impl(self) -> Any:
        try:
            from vllm.model_executor.layers.fused_moe.topk_weight_and_reduce import (  # noqa: PLC0415
                TopKWeightAndReduceNoOP,
            )
        except Exception:  # noqa: BLE001
            return None
        return TopKWeightAndReduceNoOP()

    def workspace_dtype(self, act_dtype: Any) -> Any:
        return act_dtype

    def workspace_shapes(self, M: Any, N: int, K: int, topk: int, global_num_experts: int, local_num_experts: int,
                         expert_tokens_meta: Any = None, activation: Any = None, *rest: Any) -> Tuple:
        """(workspace13, workspace2, output) shapes. fusedmoe's own workspace is given by the layer
        (``MoELayer.workspace_size``); ``apply`` uses ``workspace13`` when it is large enough and
        allocates otherwise, so [M, K] / [0] are requested here.

        Also accepts vLLM's older signature ``(a, aq, M, N, K, topk, global, local, meta)``, for
        which it returns the 4-tuple ``(..., dtype)``."""
        if not isinstance(M, int) and hasattr(M, "dtype"):  # old signature: (a, aq, M, N, K, ...)
            a, m, k = M, K, global_num_experts
            return ((m, k), (0,), (m, k), a.dtype)
        return ((M, K), (0,), (M, K))

    # ---- the work ----
    def _config(self, w1: Any, activation: Any) -> LayerConfig:
        act = _seeds.vllm_activation(activation)
        act["gate_up_order"] = self._gate_up_order
        qd = _quant_dtype_name(getattr(self._qc, "quant_dtype", None))
        fmt = self._format
        extra = {}
        if fmt is None:
            if qd is None:
                fmt = {"BF16": "bf16", "F16": "fp16", "F32": "fp32"}.get(_arrays.dtype_name(w1) or "")
                if fmt is None:
                    raise invalid_argument("w1", "bf16 / fp16 / fp32 weights when quant_config.quant_dtype is None",
                                           _arrays.dtype_name(w1))
            elif "float8" in qd or qd == "fp8":
                bs = getattr(self._qc, "block_shape", None)
                if bs is not None:
                    if list(bs) != [128, 128]:
                        raise unsupported("block_shape %s: fusedmoe's fp8-block uses 128x128" % list(bs))
                    fmt = "fp8-block"
                elif getattr(self._qc, "per_act_token_quant", False):
                    fmt = "fp8-channel"
                else:
                    fmt = "fp8-tensor"
            elif qd == "nvfp4":
                fmt = "nvfp4"
            elif qd == "mxfp4":
                fmt = "mxfp4"
            else:
                raise unsupported("quant_dtype %s: not a fusedmoe format for this class (pass format=...)" % qd)
        if fmt == "fp8-block":
            extra["fp8_block_ue8m0"] = self._use_ue8m0
        if fmt == "nvfp4":
            extra["act_dtype"] = "nvfp4"
        if fmt == "mxfp4":
            extra["act_dtype"] = self._mxfp4_act_dtype
        return LayerConfig(format=fmt, **act, **extra)

    def _layer(self, cfg: LayerConfig, w1: Any, w2: Any, k: int, w1_scale: Any = None, w2_scale: Any = None) -> MoELayer:
        qc = self._qc
        s1 = w1_scale if w1_scale is not None else getattr(qc, "w1_scale", None)
        s2 = w2_scale if w2_scale is not None else getattr(qc, "w2_scale", None)
        a1, a2 = getattr(qc, "a1_scale", None), getattr(qc, "a2_scale", None)
        g1, g2 = getattr(qc, "g1_alphas", None), getattr(qc, "g2_alphas", None)
        ag1, ag2 = getattr(qc, "a1_gscale", None), getattr(qc, "a2_gscale", None)
        b1, b2 = getattr(qc, "w1_bias", None), getattr(qc, "w2_bias", None)
        key = ("vllm-experts", cfg) + _seeds._key(w1, w2, s1, s2, a1, a2, g1, g2, ag1, ag2, b1, b2)

        def build() -> MoELayer:
            e = _arrays.shape(w1)[0]
            w = dict(w13_weight=w1, w2_weight=w2, w13_bias=_seeds._bias_f32(b1), w2_bias=_seeds._bias_f32(b2))
            rows = _arrays.shape(w1)[1]
            if cfg.format == "fp8-tensor":
                w.update(w13_weight_scale=tm.expand(s1, e, "w1_scale"), w2_weight_scale=tm.expand(s2, e, "w2_scale"),
                         w13_input_scale=tm.scalar1(a1, "a1_scale") if a1 is not None else None,
                         w2_input_scale=tm.scalar1(a2, "a2_scale") if a2 is not None else None)
            elif cfg.format == "fp8-channel":
                w.update(w13_weight_scale=_seeds._rows_scale(s1, e, rows, "w1_scale"),
                         w2_weight_scale=_seeds._rows_scale(s2, e, k, "w2_scale"))
            elif cfg.format in ("fp8-block", "w4a8-int4"):
                w.update(w13_weight_scale=s1, w2_weight_scale=s2)
            elif cfg.format == "nvfp4":
                n = _arrays.shape(w2)[2] * 2
                sc1, lay = _seeds._blockscale_layout(s1, e, rows, k // 16, "auto", "w1_scale")
                sc2, _ = _seeds._blockscale_layout(s2, e, k, n // 16, lay.replace("_128x4", ""), "w2_scale")
                gs1, gs2 = tm.expand(ag1, e, "a1_gscale"), tm.expand(ag2, e, "a2_gscale")
                w.update(w13_weight_scale=sc1, w2_weight_scale=sc2,
                         w13_weight_scale_2=tm.expand(g1, e, "g1_alphas") * gs1,
                         w2_weight_scale_2=tm.expand(g2, e, "g2_alphas") * gs2,
                         w13_input_scale=1.0 / gs1, w2_input_scale=1.0 / gs2)
                return MoELayer(LayerConfig(**dict(cfg.to_dict(), weight_scale_layout=lay)), w)
            elif cfg.format == "mxfp4":
                n = _arrays.shape(w2)[2] * 2
                sc1, lay = _seeds._blockscale_layout(s1, e, rows, k // 32, "auto", "w1_scale")
                sc2, _ = _seeds._blockscale_layout(s2, e, k, n // 32, lay.replace("_128x4", ""), "w2_scale")
                w.update(w13_weight_scale=sc1, w2_weight_scale=sc2)
                return MoELayer(LayerConfig(**dict(cfg.to_dict(), weight_scale_layout=lay)), w)
            return MoELayer(cfg, w)

        return get_layer(key, build, refs=[w1, w2, s1, s2, a1, a2, g1, g2, ag1, ag2, b1, b2])

    def apply(self, output: Any, hidden_states: Any, w1: Any, w2: Any, topk_weights: Any, topk_ids: Any,
              activation: Any, global_num_experts: int, expert_map: Any, *args: Any, **kwargs: Any) -> None:
        """Writes ``output`` [M, K] = the weighted sum of the experts' outputs.

        Signature of vLLM's ``apply(output, hidden_states, w1, w2, topk_weights, topk_ids, activation,
        global_num_experts, expert_map, a1q_scale, a2_scale, workspace13, workspace2,
        expert_tokens_meta, apply_router_weight_on_input)`` (older vLLM versions also pass
        ``w1_scale, w2_scale, w1_zp, w2_zp`` after ``expert_map``: accepted, and the scales then
        override ``quant_config``'s). ``hidden_states`` is unquantised, or, for ``fp8-block`` only,
        float8_e4m3fn codes quantised per token and group of 128 with their float32 scales
        [M, ceil(K/128)] in ``a1q_scale`` (what vLLM's DeepGemmExperts receives; used as given,
        never re-quantised; the activation dtype is ``output``'s)."""
        names_new = ("a1q_scale", "a2_scale", "workspace13", "workspace2", "expert_tokens_meta",
                     "apply_router_weight_on_input")
        names_old = ("w1_scale", "w2_scale", "w1_zp", "w2_zp") + names_new
        names = names_old if len(args) > len(names_new) or "w1_zp" in kwargs else names_new
        vals = dict(zip(names, args))
        vals.update(kwargs)
        if vals.get("w1_zp") is not None or vals.get("w2_zp") is not None:
            raise unsupported("zero points (w1_zp / w2_zp) are not a fusedmoe format")
        k = _arrays.shape(hidden_states)[-1]
        cfg = self._config(w1, activation)
        x_scale = _prequantized_scale(cfg, hidden_states, vals.get("a1q_scale"))
        packed = cfg.format in ("nvfp4", "mxfp4", "w4a8-int4")
        layer = self._layer(cfg, w1 if packed else tm.weights_nkc(w1, k, "w1"), w2 if packed else _seeds._w2_nkc(w2, k), k,
                            vals.get("w1_scale"), vals.get("w2_scale"))
        m = _arrays.shape(hidden_states)[0]
        topk = _arrays.shape(topk_ids)[1]
        ws = _seeds._workspace_from(layer, m, topk, vals.get("workspace13"), vals.get("workspace2"))
        layer(hidden_states, topk_ids, topk_weights, expert_map=expert_map,
              apply_router_weight_on_input=bool(vals.get("apply_router_weight_on_input") or False),
              output=output, workspace=ws, hidden_states_scale=x_scale)

    def moe_sum(self, input: Any, output: Any) -> None:
        raise NotImplementedError("fusedmoe does the top-k reduction inside apply()")


def _prequantized_scale(cfg: LayerConfig, hidden_states: Any, a1q_scale: Any) -> Any:
    """The group scales to pass with pre-quantised hidden states, None for unquantised ones (and
    InvalidArgument for quantised inputs fusedmoe cannot take as they are)."""
    dt = _arrays.dtype_name(hidden_states)
    if dt in ("F32", "F16", "BF16"):
        return None
    if cfg.format != "fp8-block" or dt not in ("F8_E4M3", "U8"):
        raise invalid_argument("hidden_states", "unquantised activations (expects_unquantized_inputs is True: use a "
                               "prepare/finalize that does not quantise); only fp8-block layers also take float8 "
                               "codes quantised per token and group of 128 with a1q_scale", dt)
    if a1q_scale is None:
        raise invalid_argument("a1q_scale", "float32 1x128 group scales with float8 hidden_states", "None")
    k = _arrays.shape(hidden_states)[-1]
    want = tuple(_arrays.shape(hidden_states)[:-1]) + (-(-k // 128),)
    if tuple(_arrays.shape(a1q_scale)) != want:
        raise invalid_argument("a1q_scale", "shape %s (per token and group of 128; per-tensor or per-token scales "
                               "are not fusedmoe's fp8-block inputs)" % list(want), list(_arrays.shape(a1q_scale)))
    return a1q_scale if tm.is_contiguous(a1q_scale) else tm.contiguous(a1q_scale)


class FusedMoEBatchedExperts(FusedMoEExperts):
    """fusedmoe as a vLLM modular-kernel experts implementation for the batched layout (the shape
    of vLLM's ``CutlassBatchedExpertsFp8``; activation format ``BatchedExperts``).

    ``apply`` takes ``hidden_states`` [E, T, K] (E = local experts, T = rows per expert) with
    ``expert_tokens_meta.expert_num_tokens`` [E] int32 valid rows per expert (on the device: no
    host sync), and writes ``output`` [E, T, K] = each expert's MLP of its rows, unweighted; rows
    past the count are zeros (vLLM's kernels leave them undefined). The routing weights are applied
    by the prepare/finalize (``finalize_weight_and_reduce_impl`` is ``TopKWeightAndReduceDelegate``).
    Inputs are unquantised (any format), or for ``fp8-block`` float8 codes with ``a1q_scale``
    [E, T, ceil(K/128)] (BatchedDeepGemmExperts' inputs).

    Args:
        max_experts_per_worker: E, the local experts (the first dimension of the batched tensors).
        num_dispatchers: how many ranks dispatch to this one (vLLM sizes the workspaces by it).
        out_dtype: output dtype when the workspace shapes are asked with vLLM's older signature
            (default: the activations').
        quant_config, moe_config, and the keywords: as :class:`FusedMoEExperts`.

    Differences from vLLM's CutlassBatchedExpertsFp8:
        * Any fusedmoe format, not only fp8 per-tensor / per-channel; pre-quantised inputs only
          for fp8-block (per-tensor / per-token quantised activations are refused: use a
          prepare/finalize that does not quantise).
        * The stride tensors (``ab_strides1``, ``c_strides1``, ...) are accepted as keywords and
          ignored.
        * No ``expert_map`` (as vLLM's: ``supports_expert_map`` is False): rows are already local.
    """

    def __init__(self, max_experts_per_worker: int, num_dispatchers: int = 1, out_dtype: Any = None,
                 quant_config: Any = None, moe_config: Any = None, *, format: Optional[str] = None,
                 gate_up_order: str = "gate_up", mxfp4_act_dtype: str = "bf16", use_ue8m0: bool = False,
                 **ignored: Any) -> None:
        unknown = set(ignored) - {"ab_strides1", "ab_strides2", "c_strides1", "c_strides2", "device"}
        if unknown:
            raise TypeError("unexpected keyword argument %r" % sorted(unknown)[0])
        super().__init__(moe_config, quant_config, format=format, gate_up_order=gate_up_order,
                         mxfp4_act_dtype=mxfp4_act_dtype, use_ue8m0=use_ue8m0)
        if int(max_experts_per_worker) <= 0:
            raise invalid_argument("max_experts_per_worker", "> 0", max_experts_per_worker)
        self.max_experts_per_worker = int(max_experts_per_worker)
        self.num_dispatchers = int(num_dispatchers)
        self.out_dtype = out_dtype

    @property
    def activation_formats(self) -> Tuple[Any, Any]:
        fmt = FusedMoEBatchedExperts.activation_format()
        return (fmt, fmt)

    @staticmethod
    def activation_format() -> Any:
        if _mk is not None and hasattr(_mk, "FusedMoEActivationFormat"):
            return _mk.FusedMoEActivationFormat.BatchedExperts
        return "batched"

    def supports_chunking(self) -> bool:
        return False

    def supports_expert_map(self) -> bool:
        return False

    def finalize_weight_and_reduce_impl(self) -> Any:
        try:
            from vllm.model_executor.layers.fused_moe.topk_weight_and_reduce import (  # noqa: PLC0415
                TopKWeightAndReduceDelegate,
            )
        except Exception:  # noqa: BLE001
            return None
        return TopKWeightAndReduceDelegate()

    def workspace_shapes(self, M: Any, N: int, K: int, topk: int, global_num_experts: int, local_num_experts: int,
                         expert_tokens_meta: Any = None, activation: Any = None, *rest: Any) -> Tuple:
        """(workspace13, workspace2, output) shapes, as vLLM's CutlassBatchedExpertsFp8 sizes them:
        ``(E, M * num_dispatchers, max(N, K))``, ``(E, M * num_dispatchers, max(N // 2, K))``,
        ``(E, M, K)`` with E = ``max_experts_per_worker`` and M the rows per expert. ``apply`` uses
        ``workspace13`` as fusedmoe's workspace when it is large enough (else allocates).

        Also accepts vLLM's older signature ``(a, aq, M, N, K, topk, global, local, meta)`` (M is
        then ``aq.size(1)``), returning ``(..., dtype)``."""
        e = self.max_experts_per_worker
        if not isinstance(M, int) and hasattr(M, "dtype"):  # old signature: (a, aq, M, N, K, ...)
            a, aq, m, n, k = M, N, K, topk, global_num_experts
            if len(_arrays.shape(aq)) == 3:
                m = _arrays.shape(aq)[1]  # the padded rows per expert, as vLLM takes them
            dnum = self.num_dispatchers
            return ((e, m * dnum, max(n, k)), (e, m * dnum, max(n // 2, k)), (e, m, k),
                    self.out_dtype if self.out_dtype is not None else a.dtype)
        dnum = self.num_dispatchers
        return ((e, M * dnum, max(N, K)), (e, M * dnum, max(N // 2, K)), (e, M, K))

    def apply(self, output: Any, hidden_states: Any, w1: Any, w2: Any, topk_weights: Any, topk_ids: Any,
              activation: Any, global_num_experts: int, expert_map: Any, *args: Any, **kwargs: Any) -> None:
        """Writes ``output`` [E, T, K]: row t of expert e is expert e's MLP of ``hidden_states[e, t]``
        for ``t < expert_num_tokens[e]``, zeros after (no routing weights).

        Signature of vLLM's ``apply`` (as :meth:`FusedMoEExperts.apply`); the counts come from
        ``expert_tokens_meta.expert_num_tokens`` (required); ``topk_weights`` / ``topk_ids`` are
        not read. ``apply_router_weight_on_input`` is the prepare step's business (it scaled the
        rows already) and is ignored here, as in vLLM's batched experts."""
        names_new = ("a1q_scale", "a2_scale", "workspace13", "workspace2", "expert_tokens_meta",
                     "apply_router_weight_on_input")
        names_old = ("w1_scale", "w2_scale", "w1_zp", "w2_zp") + names_new
        names = names_old if len(args) > len(names_new) or "w1_zp" in kwargs else names_new
        vals = dict(zip(names, args))
        vals.update(kwargs)
        if vals.get("w1_zp") is not None or vals.get("w2_zp") is not None:
            raise unsupported("zero points (w1_zp / w2_zp) are not a fusedmoe format")
        if expert_map is not None:
            raise invalid_argument("expert_map", "None (the batched layout holds local experts' rows already)",
                                   "a tensor")
        meta = vals.get("expert_tokens_meta")
        counts = getattr(meta, "expert_num_tokens", None) if meta is not None else None
        if counts is None:
            raise invalid_argument("expert_tokens_meta", "vLLM's ExpertTokensMetadata with expert_num_tokens [E] "
                                   "(the valid rows per expert of the batched layout)", "None")
        shp = _arrays.shape(hidden_states)
        if len(shp) != 3:
            raise invalid_argument("hidden_states", "the batched layout [E, T, K]", list(shp))
        k = shp[2]
        cfg = self._config(w1, activation)
        x_scale = _prequantized_scale(cfg, hidden_states, vals.get("a1q_scale"))
        packed = cfg.format in ("nvfp4", "mxfp4", "w4a8-int4")
        layer = self._layer(cfg, w1 if packed else tm.weights_nkc(w1, k, "w1"), w2 if packed else _seeds._w2_nkc(w2, k), k,
                            vals.get("w1_scale"), vals.get("w2_scale"))
        ws = _masked_workspace_from(layer, shp[1], vals.get("workspace13"), vals.get("workspace2"))
        layer.run_masked(hidden_states, counts, output=output, hidden_states_scale=x_scale, workspace=ws)


def _masked_workspace_from(layer: MoELayer, t: int, *candidates: Any) -> Any:
    """A caller-provided buffer large enough for run_masked's workspace, or None (allocate)."""
    need = layer.masked_workspace_size(t)
    if need == 0:
        return None
    for ws in candidates:
        if ws is None:
            continue
        nbytes = _arrays.numel(ws) * _arrays._ITEMSIZE.get(_arrays.dtype_name(ws) or "U8", 1)
        if nbytes >= need and tm.is_contiguous(ws) and _arrays.device(ws) == layer.device:
            return ws
    return None
