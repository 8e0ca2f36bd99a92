"""Framework-neutral helpers: what the C++ core accepts, array identity, allocation, streams.

The core takes any DLPack (``__dlpack__``) or buffer-protocol array without copying. Python
code here only decides three things the core cannot: how to name dtypes that a framework has no
DLPack code for (NumPy/ml_dtypes bfloat16 and float8, PyTorch float8), how to allocate a new array
"like" an existing one (output, workspace) with that array's own framework and device, and which
CUDA stream is "current" for that framework.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence, Tuple

__all__ = ["Typed", "as_dtype"]

# DLPack device types (__dlpack_device__).
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13

# fusedmoe dtype names <-> NumPy dtype strings (raw-bit storage where NumPy has no such type).
_NUMPY_STORAGE = {
    "F32": "float32",
    "F16": "float16",
    "BF16": "uint16",
    "F8_E4M3": "uint8",
    "F8_E5M2": "uint8",
    "U8": "uint8",
    "I32": "int32",
    "I64": "int64",
}
_ML_DTYPES_NAMES = {"bfloat16": "BF16", "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "float8_e8m0fnu": "U8"}
_NUMPY_NAMES = {"float32": "F32", "float16": "F16", "uint8": "U8", "int32": "I32", "int64": "I64"}
_ITEMSIZE = {"F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "U8": 1, "I32": 4, "I64": 8}


class Typed(NamedTuple):
    """An array whose bits are to be read as ``dtype`` (a fusedmoe dtype name: ``"BF16"``,
    ``"F8_E4M3"``, ...). Made by :func:`as_dtype`; accepted wherever a tensor is."""

    array: Any
    dtype: str


def as_dtype(array: Any, dtype: str) -> Typed:
    """Tag ``array`` so fusedmoe reads its bits as ``dtype`` (no copy).

    NumPy has no bfloat16 or float8 types: keep bf16 data in a ``uint16`` array and fp8 in a
    ``uint8`` array and pass ``as_dtype(a, "bf16")`` / ``as_dtype(a, "fp8")``. Weight tensors do
    not need this: their dtype is fixed by the layer format, and raw integer bits of that size are
    accepted as it. When the element sizes differ the last dimension is rescaled (e.g. an int32
    view of packed 4-bit data).
    """
    return Typed(array, _canonical_dtype(dtype))


_DTYPE_ALIASES = {
    "f32": "F32", "fp32": "F32", "float32": "F32", "float": "F32",
    "f16": "F16", "fp16": "F16", "float16": "F16", "half": "F16",
    "bf16": "BF16", "bfloat16": "BF16",
    "f8_e4m3": "F8_E4M3", "fp8": "F8_E4M3", "e4m3": "F8_E4M3", "float8_e4m3fn": "F8_E4M3",
    "f8_e5m2": "F8_E5M2", "e5m2": "F8_E5M2", "float8_e5m2": "F8_E5M2",
    "u8": "U8", "uint8": "U8", "e8m0": "U8", "float8_e8m0fnu": "U8",
    "i32": "I32", "int32": "I32", "i64": "I64", "int64": "I64",
}


def _canonical_dtype(name: str) -> str:
    if name in _ITEMSIZE:
        return name
    key = str(name).lower()
    if key in _DTYPE_ALIASES:
        return _DTYPE_ALIASES[key]
    from . import _errors

    raise _errors.invalid_argument("dtype", "a dtype name such as bf16, fp16, fp32, fp8, uint8, int32", repr(name))


def framework(x: Any) -> str:
    """'torch', 'numpy', 'cupy', 'jax' or 'other'."""
    if isinstance(x, Typed):
        return framework(x.array)
    mod = type(x).__module__.split(".", 1)[0]
    if mod == "torch":
        return "torch"
    if mod == "numpy":
        return "numpy"
    if mod == "cupy":
        return "cupy"
    if mod in ("jax", "jaxlib"):
        return "jax"
    return "other"


def _torch():
    import torch  # noqa: PLC0415 (optional dependency)

    return torch


_TORCH_NAMES = None


def _torch_names():
    global _TORCH_NAMES
    if _TORCH_NAMES is None:
        torch = _torch()
        names = {
            torch.float32: "F32",
            torch.float16: "F16",
            torch.bfloat16: "BF16",
            torch.uint8: "U8",
            torch.int32: "I32",
            torch.int64: "I64",
        }
        for attr, name in (("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2"), ("float8_e8m0fnu", "U8")):
            if hasattr(torch, attr):
                names[getattr(torch, attr)] = name
        _TORCH_NAMES = names
    return _TORCH_NAMES


def torch_dtype(name: str):
    """The torch dtype of a fusedmoe dtype name."""
    torch = _torch()
    name = _canonical_dtype(name)
    table = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "U8": torch.uint8,
             "I32": torch.int32, "I64": torch.int64}
    if name == "F8_E4M3":
        return torch.float8_e4m3fn
    if name == "F8_E5M2":
        return torch.float8_e5m2
    return table[name]


def dtype_name(x: Any) -> Optional[str]:
    """The fusedmoe dtype name of an array, or None when its dtype has none (e.g. uint16)."""
    if isinstance(x, Typed):
        return x.dtype
    fw = framework(x)
    if fw == "torch":
        return _torch_names().get(x.dtype)
    dt = getattr(x, "dtype", None)
    if dt is None:
        return None
    name = getattr(dt, "name", str(dt))
    return _ML_DTYPES_NAMES.get(name) or _NUMPY_NAMES.get(name)


def require_array(x: Any, name: str) -> None:
    """InvalidArgument (worded as the core's) unless x looks like an array."""
    base = x.array if isinstance(x, Typed) else x
    if not hasattr(base, "shape") and not hasattr(base, "__dlpack__"):
        from . import _errors

        raise _errors.invalid_argument(name, "an array exporting DLPack (__dlpack__) or the buffer protocol",
                                       "an object of type %s" % type(base).__name__)


def shape(x: Any) -> Tuple[int, ...]:
    if isinstance(x, Typed):
        return tuple(int(d) for d in x.array.shape)
    return tuple(int(d) for d in x.shape)


def device(x: Any) -> Tuple[str, int]:
    """('cpu', 0) or ('cuda', index), from ``__dlpack_device__`` (any DLPack producer)."""
    if isinstance(x, Typed):
        return device(x.array)
    fw = framework(x)
    if fw == "torch":
        d = x.device
        if d.type == "cuda":
            return ("cuda", d.index if d.index is not None else _torch().cuda.current_device())
        return ("cpu", 0) if d.type == "cpu" else (d.type, d.index or 0)
    if fw == "numpy":
        return ("cpu", 0)
    dl = getattr(x, "__dlpack_device__", None)
    if dl is not None:
        kind, index = dl()
        kind = int(kind)
        if kind in (_DL_CPU, _DL_CUDA_HOST):
            return ("cpu", 0)
        if kind in (_DL_CUDA, _DL_CUDA_MANAGED):
            return ("cuda", int(index))
        return ("dlpack%d" % kind, int(index))
    return ("cpu", 0)


def core_arg(x: Any, raw: bool = False) -> Any:
    """What to hand the C++ core for tensor ``x`` (None stays None).

    raw=True (PyTorch only, for per-call arguments): a raw descriptor, the fastest path; the
    caller keeps ``x`` alive for the duration of the call. Otherwise a DLPack-exportable object,
    which the core keeps alive as long as it needs it.
    """
    if x is None:
        return None
    if isinstance(x, Typed):
        inner = core_arg(x.array, False)
        if isinstance(inner, tuple):  # already (bytes, name): the tag wins
            inner = inner[0]
        return (inner, x.dtype)
    fw = framework(x)
    if fw == "torch":
        name = _torch_names().get(x.dtype)
        if raw and name is not None:
            dev = x.device
            if dev.type == "cuda":
                return (x.data_ptr(), name, tuple(x.shape), tuple(x.stride()), 1,
                        dev.index if dev.index is not None else _torch().cuda.current_device())
            if dev.type == "cpu":
                return (x.data_ptr(), name, tuple(x.shape), tuple(x.stride()), 0, 0)
        t = x.detach()
        if t.dtype.is_floating_point and t.element_size() == 1:
            # float8: DLPack export of float8 is not in every torch version; pass the bytes.
            return (t.view(_torch().uint8), name or "U8")
        return t
    if fw == "numpy":
        mapped = _ML_DTYPES_NAMES.get(x.dtype.name)
        if mapped is not None:  # ml_dtypes arrays: NumPy cannot export these through DLPack
            return (x.view("uint%d" % (8 * x.dtype.itemsize)), mapped)
        return x
    return x


def identity(x: Any) -> Tuple:
    """A cheap key naming the memory and layout of ``x`` (for layer caches)."""
    if isinstance(x, Typed):
        return ("typed", x.dtype) + identity(x.array)
    fw = framework(x)
    if fw == "torch":
        return ("torch", x.data_ptr(), tuple(x.shape), tuple(x.stride()), str(x.dtype), str(x.device))
    if fw == "numpy":
        return ("numpy", x.__array_interface__["data"][0], x.shape, x.strides, x.dtype.str)
    if fw == "cupy":
        return ("cupy", x.data.ptr, x.shape, x.strides, x.dtype.str, x.device.id)
    return ("id", id(x))


def numel(x: Any) -> int:
    n = 1
    for d in shape(x):
        n *= d
    return n


def empty(like: Any, shp: Sequence[int], dtype: str) -> Any:
    """A new array of ``dtype`` (a fusedmoe name) with the framework and device of ``like``."""
    from . import _errors

    dtype = _canonical_dtype(dtype)
    shp = tuple(int(d) for d in shp)
    fw = framework(like)
    dev = device(like)
    if fw == "torch":
        torch = _torch()
        base = like.array if isinstance(like, Typed) else like
        return torch.empty(shp, dtype=torch_dtype(dtype), device=base.device)
    if fw == "cupy":
        import cupy  # noqa: PLC0415

        base = like.array if isinstance(like, Typed) else like
        with cupy.cuda.Device(base.device.id):
            arr = cupy.empty(shp, dtype=_NUMPY_STORAGE[dtype])
        return Typed(arr, dtype) if dtype in ("BF16", "F8_E4M3", "F8_E5M2") else arr
    if dev[0] != "cpu":
        raise _errors.invalid_argument(
            "output", "an output array (fusedmoe cannot allocate %s arrays on %s)" % (fw, dev[0]), "None")
    import numpy as np  # noqa: PLC0415

    if dtype in ("BF16", "F8_E4M3", "F8_E5M2"):
        ml = _ml_dtype(dtype)
        if ml is not None and not isinstance(like, Typed):
            return np.empty(shp, dtype=ml)
        return Typed(np.empty(shp, dtype=_NUMPY_STORAGE[dtype]), dtype)
    return np.empty(shp, dtype=_NUMPY_STORAGE[dtype])


def _ml_dtype(dtype: str):
    try:
        import ml_dtypes  # noqa: PLC0415
    except ImportError:
        return None
    return {"BF16": ml_dtypes.bfloat16, "F8_E4M3": ml_dtypes.float8_e4m3fn, "F8_E5M2": ml_dtypes.float8_e5m2}[dtype]


def current_stream(x: Any) -> int:
    """The framework's current CUDA stream for ``x``'s device, as an integer handle (0 for CPU
    arrays and frameworks without a notion of a current stream: the legacy default stream)."""
    dev = device(x)
    if dev[0] != "cuda":
        return 0
    fw = framework(x)
    if fw == "torch":
        return int(_torch().cuda.current_stream(dev[1]).cuda_stream)
    if fw == "cupy":
        import cupy  # noqa: PLC0415

        return int(cupy.cuda.get_current_stream().ptr)
    return 0


def as_int32_ids(ids: Any) -> Any:
    """topk ids as int32 (int64 ids, as torch.topk returns them, are converted: a small copy)."""
    name = dtype_name(ids)
    if name == "I32" or name is None:
        return ids
    if name == "I64":
        fw = framework(ids)
        if fw == "torch":
            return ids.to(_torch().int32)
        if hasattr(ids, "astype"):
            return ids.astype("int32")
    return ids


def as_f32_weights(w: Any) -> Any:
    """topk weights as float32 (bf16 / fp16 weights are converted: exact, a small copy)."""
    name = dtype_name(w)
    if name in ("BF16", "F16"):
        fw = framework(w)
        if fw == "torch":
            return w.float()
        if hasattr(w, "astype"):
            return w.astype("float32")
    return w


def zeros(like: Any, shp: Sequence[int], dtype: str) -> Any:
    arr = empty(like, shp, dtype)
    base = arr.array if isinstance(arr, Typed) else arr
    if framework(base) == "torch":
        base.zero_()
    else:
        base[...] = 0
    return arr


def arange_mod(like: Any, n: int, mod: int) -> Any:
    """int32 [n] array (i % mod) with the framework and device of ``like``."""
    fw = framework(like)
    if fw == "torch":
        torch = _torch()
        base = like.array if isinstance(like, Typed) else like
        return torch.remainder(torch.arange(n, device=base.device, dtype=torch.int32), mod)
    if fw == "cupy":
        import cupy  # noqa: PLC0415

        base = like.array if isinstance(like, Typed) else like
        with cupy.cuda.Device(base.device.id):
            return (cupy.arange(n, dtype="int32") % mod).astype("int32")
    import numpy as np  # noqa: PLC0415

    return (np.arange(n, dtype=np.int32) % mod).astype(np.int32)


def full(like: Any, shp: Sequence[int], value: float, dtype: str = "F32") -> Any:
    arr = empty(like, shp, dtype)
    base = arr.array if isinstance(arr, Typed) else arr
    if framework(base) == "torch":
        base.fill_(value)
    else:
        base[...] = value
    return arr


def reshape(x: Any, shp: Sequence[int]) -> Any:
    if isinstance(x, Typed):
        return Typed(reshape(x.array, shp), x.dtype)
    return x.reshape(tuple(shp))
