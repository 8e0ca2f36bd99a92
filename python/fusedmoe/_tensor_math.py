"""Small framework-neutral tensor operations for the drop-ins (PyTorch and NumPy / CuPy-like
arrays): scale arithmetic on [E]-sized tensors, views, dtype casts. Each runs with the array's own
framework on its own device; the drop-ins run them once per weight set (the results are cached
with the layer), plus the input dequantisation of pre-quantised inputs."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from . import _arrays
from ._errors import invalid_argument, unsupported


def is_torch(x: Any) -> bool:
    return _arrays.framework(x) == "torch"


def _np():
    import numpy as np  # noqa: PLC0415

    return np


def xp_of(x: Any):
    """The array namespace of x for NumPy-like arrays (numpy / cupy)."""
    if _arrays.framework(x) == "cupy":
        import cupy  # noqa: PLC0415

        return cupy
    return _np()


def unwrap(x: Any) -> Any:
    return x.array if isinstance(x, _arrays.Typed) else x


def numel(x: Any) -> int:
    return _arrays.numel(x)


def to_f32(x: Any) -> Any:
    """float32 values of x (bf16 / fp16 / fp8 / Typed raw bits decoded)."""
    if isinstance(x, _arrays.Typed):
        if x.dtype in ("F32",):
            return x.array
        from . import _ops  # noqa: PLC0415

        fmt = {"BF16": "bf16", "F16": "fp16", "F8_E4M3": "e4m3", "F8_E5M2": "e5m2", "U8": "e8m0"}.get(x.dtype)
        if fmt is None:
            raise invalid_argument("tensor", "a floating-point tensor", x.dtype)
        return _ops.decode(x.array, fmt)
    if is_torch(x):
        return x.detach().float()
    name = _arrays.dtype_name(x)
    if name == "F8_E4M3" and getattr(x.dtype, "name", "") != "float8_e4m3fn":
        from . import _ops  # noqa: PLC0415

        return _ops.decode(x, "e4m3")
    return x.astype("float32")


def flat_f32(x: Any) -> Any:
    return to_f32(x).reshape(-1)


def expand(x: Any, n: int, name: str) -> Any:
    """A contiguous float32 [n] array from a scalar / [1] / [n] tensor."""
    v = flat_f32(x)
    k = numel(v)
    if k == n:
        return v.contiguous() if is_torch(v) else xp_of(v).ascontiguousarray(v)
    if k != 1:
        raise invalid_argument(name, "a scalar or %d values" % n, "%d values" % k)
    if is_torch(v):
        return v.expand(n).contiguous()
    xp = xp_of(v)
    return xp.ascontiguousarray(xp.broadcast_to(v, (n,))).astype("float32")


def scalar1(x: Any, name: str) -> Any:
    """A float32 [1] array from a scalar tensor."""
    v = flat_f32(x)
    if numel(v) != 1:
        raise unsupported("'%s' with %d values: fusedmoe takes one static scale here (a per-tensor scale)"
                          % (name, numel(v)))
    return v.contiguous() if is_torch(v) else xp_of(v).ascontiguousarray(v)


def host_floats(x: Any) -> list:
    """The values of a small tensor on the host (synchronises a CUDA tensor: setup-time only)."""
    if x is None:
        return []
    if isinstance(x, (int, float)):
        return [float(x)]
    v = flat_f32(x)
    if is_torch(v):
        return [float(t) for t in v.cpu().tolist()]
    if _arrays.framework(v) == "cupy":
        return [float(t) for t in v.get().tolist()]
    return [float(t) for t in _np().asarray(v).tolist()]


def contiguous(x: Any) -> Any:
    if isinstance(x, _arrays.Typed):
        return _arrays.Typed(contiguous(x.array), x.dtype)
    if is_torch(x):
        return x.contiguous()
    return xp_of(x).ascontiguousarray(x)


def is_contiguous(x: Any) -> bool:
    x = unwrap(x)
    if is_torch(x):
        return x.is_contiguous()
    flags = getattr(x, "flags", None)
    return bool(flags["C_CONTIGUOUS"]) if flags is not None else True


def swap12(x: Any) -> Any:
    """x.transpose(1, 2) (a view)."""
    if isinstance(x, _arrays.Typed):
        return _arrays.Typed(swap12(x.array), x.dtype)
    if is_torch(x):
        return x.transpose(1, 2)
    return x.swapaxes(1, 2)


def strides_elems(x: Any) -> Sequence[int]:
    x = unwrap(x)
    if is_torch(x):
        return tuple(x.stride())
    return tuple(s // x.dtype.itemsize for s in x.strides)


def weights_nkc(w: Any, k: int, name: str) -> Any:
    """A [E, rows, k] row-major view of a weight passed as [E, rows, k] or transposed [E, k, rows]
    (vLLM's CUTLASS / DeepGEMM paths pass ``w.transpose(1, 2)``); no copy."""
    shp = _arrays.shape(w)
    if len(shp) != 3:
        raise invalid_argument(name, "3 dimensions", list(shp))
    if shp[2] == k and is_contiguous(w):
        return w
    if shp[1] == k:
        t = swap12(w)
        if is_contiguous(t):
            return t
    if shp[2] == k:
        return w  # strided: the layer reports the strides it needs
    raise invalid_argument(name, "shape [E, rows, %d] or its transpose [E, %d, rows]" % (k, k), list(shp))


def dtype_from_any(dtype: Any) -> Optional[str]:
    """A fusedmoe dtype name from a torch dtype, NumPy dtype or name."""
    if dtype is None:
        return None
    mod = type(dtype).__module__.split(".", 1)[0]
    if mod == "torch":
        return _arrays._torch_names().get(dtype)
    name = getattr(dtype, "name", None) or getattr(dtype, "__name__", None) or str(dtype)
    try:
        return _arrays._canonical_dtype(name)
    except Exception:  # noqa: BLE001
        np = _np()
        try:
            return _arrays._NUMPY_NAMES.get(np.dtype(dtype).name) or _arrays._ML_DTYPES_NAMES.get(np.dtype(dtype).name)
        except TypeError:
            return None


def cast(x: Any, dtype: str) -> Any:
    """x (any float array) converted to fusedmoe dtype ``dtype`` with x's framework (a copy)."""
    if is_torch(unwrap(x)) and not isinstance(x, _arrays.Typed):
        return x.to(_arrays.torch_dtype(dtype))
    f = to_f32(x)
    if dtype == "F32":
        return f
    if dtype == "F16":
        return f.astype("float16")
    if dtype == "BF16":
        ml = _arrays._ml_dtype("BF16")
        if ml is not None and _arrays.framework(f) == "numpy":
            return f.astype(ml)
        from . import _ops  # noqa: PLC0415

        return _arrays.Typed(_ops.encode(f, "bf16"), "BF16")
    raise invalid_argument("output_dtype", "float32, float16 or bfloat16", dtype)


def copy_into(dst: Any, src: Any) -> None:
    """dst[...] = src (same shape; src converted to dst's dtype)."""
    d = unwrap(dst)
    if is_torch(d):
        d.copy_(unwrap(src))
        return
    ddt = _arrays.dtype_name(dst)
    sdt = _arrays.dtype_name(src)
    if ddt == sdt:
        d[...] = unwrap(src)
        return
    conv = cast(src, ddt)
    d[...] = unwrap(conv)


E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def dequant_nvfp4(q: Any, sf: Any, global_scale: Any, rows: int, cols: int, out_dtype: str, swizzled: bool) -> Any:
    """NVFP4 activations (packed e2m1 [rows, cols/2], e4m3 block scales, encode scale gs) -> float:
    q * sf / gs, rounded to ``out_dtype``. ``swizzled``: the block scales are in the 128x4 layout."""
    from . import _ops  # noqa: PLC0415

    nb = cols // 16
    if is_torch(unwrap(q)):
        torch = _arrays._torch()
        qt = unwrap(q).reshape(rows, cols // 2)
        if qt.dtype != torch.uint8:
            qt = qt.view(torch.uint8)
        s = unwrap(sf)
        s = s.reshape(-1).view(torch.uint8)
        if swizzled:
            pr, pc = _ops.swizzled_shape(rows, nb)
            s = _ops._torch_swizzle(s.reshape(pr, pc), True, rows, nb)
        else:
            s = s.reshape(rows, nb)
        sfv = s.view(torch.float8_e4m3fn).float()
        lut = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=qt.device)
        vals = torch.stack((lut[(qt & 0xF).long()], lut[(qt >> 4).long()]), dim=-1).reshape(rows, nb, 16)
        gs = flat_f32(global_scale).reshape(-1)[:1].to(qt.device)
        x = (vals * sfv.unsqueeze(-1) / gs).reshape(rows, cols)
        return x.to(_arrays.torch_dtype(out_dtype))
    qa = unwrap(q)
    vals = _ops.decode(_arrays.reshape(qa, (rows, cols // 2)), "e2m1").reshape(rows, nb, 16)
    s = unwrap(sf).reshape(-1)
    if swizzled:
        pr, pc = _ops.swizzled_shape(rows, nb)
        s = _ops.unswizzle_scales_128x4(s.reshape(pr, pc), rows, nb)
    else:
        s = s.reshape(rows, nb)
    sfv = _ops.decode(s.view("uint8") if hasattr(s, "view") else s, "e4m3")
    gs = host_floats(global_scale)[0]
    x = (vals * sfv[..., None] / _np().float32(gs)).reshape(rows, cols).astype("float32")
    return cast(x, out_dtype)


def expert_map_for(like: Any, ep_size: int, ep_rank: int, local: int) -> Any:
    """int32 [ep_size * local]: global id -> id - ep_rank * local on this rank, -1 elsewhere."""
    total = ep_size * local
    lo = ep_rank * local
    if is_torch(unwrap(like)):
        torch = _arrays._torch()
        g = torch.arange(total, dtype=torch.int32, device=unwrap(like).device)
        return torch.where((g >= lo) & (g < lo + local), g - lo, torch.full_like(g, -1))
    xp = xp_of(unwrap(like))
    g = xp.arange(total, dtype="int32")
    return xp.where((g >= lo) & (g < lo + local), g - lo, -1).astype("int32")
