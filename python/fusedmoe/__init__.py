"""fusedmoe: the expert part of a Mixture-of-Experts layer (permute, grouped GEMM1, activation,
GEMM2, weighted un-permute) in every weight format, on the CPU and on NVIDIA Hopper GPUs.

Tensors are any DLPack arrays (PyTorch, CuPy, JAX, NumPy), used in place on their own device and
CUDA stream. Main entry points:

* :class:`MoELayer` / :func:`fused_moe`: the layer (any format, CPU or CUDA backend); also
  pre-quantised fp8-block inputs (``hidden_states_scale=``), the batched / masked layout
  (:meth:`MoELayer.run_masked`) and :meth:`MoELayer.warmup`.
* :func:`route`: softmax / sigmoid / grouped top-k routing.
* quantisers (:func:`quantize_fp8_per_token_group`, :func:`quantize_nvfp4`, ...), the 128x4
  scale swizzle, :func:`quantize_layer` / :func:`dequantize_layer`, layer files.
* :mod:`fusedmoe.seeds`: drop-ins for vLLM's and FlashInfer's fused-MoE functions.
* :mod:`fusedmoe.vllm_experts`: experts classes for vLLM's modular kernel interface (standard
  and batched layouts).
* :mod:`fusedmoe.torch_ops`: the ``torch.ops.fusedmoe.fused_moe`` custom op (torch.compile,
  CUDA graphs); registered on import when PyTorch is installed.

Errors: :class:`InvalidArgument` (a ``ValueError``) names the argument, the expected and the
actual value; :class:`Unsupported` (a ``NotImplementedError``) says why a valid request cannot run
(e.g. a format the CUDA backend does not do yet); both derive from :class:`FusedMoEError`.
"""

from __future__ import annotations

from . import _core
from ._arrays import Typed, as_dtype
from ._errors import FusedMoEError, InvalidArgument, Unsupported
from ._layer import (
    WEIGHT_NAMES,
    LayerConfig,
    MoELayer,
    Support,
    clear_layer_cache,
    fused_moe,
    set_layer_cache_size,
)
from ._ops import (
    decode,
    dequantize_layer,
    encode,
    nvfp4_global_scale,
    quantize_fp8_block_weight,
    quantize_fp8_per_tensor,
    quantize_fp8_per_token,
    quantize_fp8_per_token_group,
    quantize_int4_group,
    quantize_layer,
    quantize_mxfp4,
    quantize_nvfp4,
    random_float_layer,
    read_layer_file,
    route,
    swizzle_scales_128x4,
    swizzled_shape,
    unswizzle_scales_128x4,
    w4a8_split_scales,
    workspace_size,
    write_layer_file,
)

__version__ = "0.1.0"

#: Whether this build has the CUDA backend compiled in.
built_with_cuda: bool = bool(_core.built_with_cuda)


def backend_available(name: str) -> bool:
    """Whether backend ``name`` (``cpu``, ``cuda``, ``auto``) is built in and usable here."""
    return bool(_core.backend_available(name))


def cuda_available() -> bool:
    """Whether the CUDA backend is built in and a CUDA device is usable."""
    return bool(_core.backend_available("cuda"))


__all__ = [
    "FusedMoEError", "InvalidArgument", "Unsupported",
    "LayerConfig", "MoELayer", "Support", "WEIGHT_NAMES", "fused_moe", "clear_layer_cache", "set_layer_cache_size",
    "route", "quantize_fp8_per_tensor", "quantize_fp8_per_token", "quantize_fp8_per_token_group", "quantize_nvfp4",
    "nvfp4_global_scale", "quantize_fp8_block_weight", "quantize_mxfp4", "quantize_int4_group", "w4a8_split_scales",
    "swizzle_scales_128x4", "unswizzle_scales_128x4", "swizzled_shape", "encode", "decode", "random_float_layer",
    "quantize_layer", "dequantize_layer", "read_layer_file", "write_layer_file", "workspace_size",
    "Typed", "as_dtype", "backend_available", "cuda_available", "built_with_cuda", "__version__",
]

# The torch custom op, when PyTorch is installed (optional dependency).
try:  # pragma: no cover - depends on the environment
    import torch as _torch  # noqa: F401
except ImportError:  # pragma: no cover
    pass
else:  # pragma: no cover
    from . import torch_ops as _torch_ops  # noqa: F401
