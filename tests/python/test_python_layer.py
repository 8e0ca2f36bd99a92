"""The layer from Python on the CPU with NumPy arrays: every format, the options, errors, caching,
zero-copy behaviour, layer files."""

import gc
import glob
import weakref

import numpy as np
import pytest

import fusedmoe
from moe_reference import bf16, make_layer, moe_reference, routing, to_float

FORMATS = ["bf16", "fp16", "fp32", "fp8-tensor", "fp8-channel", "fp8-block", "w4a8-int4", "mxfp4", "nvfp4"]
# (format, act_dtype) pairs with their tolerance against the float reference (relative to max |out|):
# quantised activations are not modelled by the reference.
CASES = [
    ("bf16", "bf16", 0.02), ("fp16", "bf16", 0.01), ("fp32", "bf16", 1e-4), ("fp8-tensor", "bf16", 0.08),
    ("fp8-channel", "bf16", 0.08), ("fp8-block", "bf16", 0.08), ("w4a8-int4", "bf16", 0.08), ("mxfp4", "bf16", 0.03),
    ("mxfp4", "fp8", 0.08), ("nvfp4", "bf16", 0.03), ("nvfp4", "nvfp4", 0.25),
]
M, E, K, N, TOPK = 7, 4, 256, 128, 2


def _x(m=M, k=K, seed=3):
    return np.random.default_rng(seed).standard_normal((m, k)).astype(np.float32)


@pytest.mark.parametrize("fmt,act_dtype,tol", CASES)
@pytest.mark.parametrize("act", ["silu", "relu2"])
def test_every_format_matches_reference_and_oracle(fmt, act_dtype, tol, act):
    cfg, w, fw = make_layer(fmt, E, K, N, act=act, bias=True, act_dtype=act_dtype)
    ids, tw = routing(M, E, TOPK)
    x = _x()
    xin = x if fmt == "fp32" else (x.astype(np.float16) if fmt == "fp16" else bf16(x))
    xf = to_float(xin)
    fast = fusedmoe.MoELayer(cfg, w)
    oracle = fusedmoe.MoELayer(cfg, w, cpu_precision="oracle")
    out = to_float(fast(xin, ids, tw))
    out_o = to_float(oracle(xin, ids, tw))
    ref = moe_reference(xf, fw["w13"], fw["w2"], ids, tw, cfg, fw.get("w13_bias"), fw.get("w2_bias"))
    scale = np.abs(ref).max()
    assert scale > 0
    assert np.abs(out - ref).max() <= tol * scale, (fmt, np.abs(out - ref).max() / scale)
    # The fast path against the library's float64 oracle (same quantisation steps).
    assert np.abs(out - out_o).max() <= max(0.02 * scale, 1e-6), (fmt, np.abs(out - out_o).max() / scale)


@pytest.mark.parametrize("order", ["gate_up", "up_gate"])
@pytest.mark.parametrize("act,interleaved", [("silu", False), ("gelu", False), ("gelu_tanh", False),
                                             ("swigluoai", False), ("swigluoai", True)])
def test_activations_and_gate_up_order(act, interleaved, order):
    cfg, w, fw = make_layer("fp32", E, 64, 32, act=act, gate_up_order=order, interleaved=interleaved)
    ids, tw = routing(M, E, TOPK, seed=5)
    x = _x(k=64)
    out = fusedmoe.MoELayer(cfg, w)(x, ids, tw)
    ref = moe_reference(x, fw["w13"], fw["w2"], ids, tw, cfg)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())


def test_hidden_state_dtypes_and_output_dtype():
    cfg, w, _ = make_layer("bf16", E, K, N)
    ids, tw = routing(M, E, TOPK)
    x = _x()
    layer = fusedmoe.MoELayer(cfg, w)
    o32 = layer(x, ids, tw)
    assert o32.dtype == np.float32 and o32.shape == (M, K)
    o16 = layer(x.astype(np.float16), ids, tw)
    assert o16.dtype == np.float16
    ob = layer(bf16(x), ids, tw)
    assert isinstance(ob, fusedmoe.Typed) and ob.dtype == "BF16" and ob.array.dtype == np.uint16
    ml_dtypes = pytest.importorskip("ml_dtypes")
    xb = to_float(bf16(x)).astype(ml_dtypes.bfloat16)
    ob2 = layer(xb, ids, tw)
    assert ob2.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(ob2.view(np.uint16), ob.array)


def test_int64_ids_and_bf16_weights_are_converted():
    cfg, w, _ = make_layer("fp32", E, 64, 32)
    ids, tw = routing(M, E, TOPK)
    x = _x(k=64)
    layer = fusedmoe.MoELayer(cfg, w)
    np.testing.assert_array_equal(layer(x, ids.astype(np.int64), tw), layer(x, ids, tw))
    np.testing.assert_array_equal(layer(x, ids, tw.astype(np.float16)), layer(x, ids, tw.astype(np.float16).astype(np.float32)))


def test_expert_map_router_weight_on_input_and_invalid_ids():
    cfg, w, fw = make_layer("fp32", E, 64, 32)
    rng = np.random.default_rng(7)
    e_global = 8
    expert_map = np.full(e_global, -1, np.int32)
    expert_map[[1, 3, 4, 6]] = [0, 1, 2, 3]
    ids = rng.integers(-1, e_global + 1, (M, 3)).astype(np.int32)  # includes ids out of range
    tw = rng.random((M, 3)).astype(np.float32)
    x = _x(k=64)
    layer = fusedmoe.MoELayer(cfg, w)
    for on_input in (False, True):
        out = layer(x, ids, tw, expert_map=expert_map, apply_router_weight_on_input=on_input)
        ref = moe_reference(x, fw["w13"], fw["w2"], ids, tw, cfg, expert_map=expert_map,
                            apply_router_weight_on_input=on_input)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-6)


def test_output_is_written_in_place_and_weights_are_not_copied():
    cfg, w, _ = make_layer("fp32", E, 64, 32)
    ids, tw = routing(M, E, TOPK)
    x = _x(k=64)
    layer = fusedmoe.MoELayer(cfg, w)
    out = np.full((M, 64), np.nan, np.float32)
    res = layer(x, ids, tw, output=out)
    assert res is out and np.isfinite(out).all() and np.abs(out).max() > 0
    w["w2_weight"][...] = 0  # the CPU backend views the caller's memory
    assert np.abs(layer(x, ids, tw)).max() == 0


def test_read_only_inputs_are_accepted_and_read_only_output_refused():
    cfg, w, _ = make_layer("fp32", E, 64, 32)
    for a in w.values():
        a.flags.writeable = False
    ids, tw = routing(M, E, TOPK)
    x = _x(k=64)
    x.flags.writeable = False
    layer = fusedmoe.MoELayer(cfg, w)
    layer(x, ids, tw)
    out = np.zeros((M, 64), np.float32)
    out.flags.writeable = False
    with pytest.raises(fusedmoe.InvalidArgument, match="'output': expected a writable array"):
        layer(x, ids, tw, output=out)


def test_errors_are_python_exceptions_with_the_library_messages():
    cfg, w, _ = make_layer("bf16", E, K, N)
    ids, tw = routing(M, E, TOPK)
    layer = fusedmoe.MoELayer(cfg, w)
    with pytest.raises(ValueError) as ei:
        layer(np.zeros((M, K + 1), np.float32), ids, tw)
    assert isinstance(ei.value, fusedmoe.InvalidArgument) and isinstance(ei.value, fusedmoe.FusedMoEError)
    assert str(ei.value) == "invalid argument 'hidden_states': expected shape [M,%d], got [%d,%d]" % (K, M, K + 1)
    assert ei.value.argument == "hidden_states"
    with pytest.raises(fusedmoe.InvalidArgument, match="'topk_weights': expected dtype F32, got I32"):
        layer(_x(), ids, ids)
    with pytest.raises(fusedmoe.InvalidArgument, match="contiguous row-major strides"):
        layer(np.asfortranarray(_x()), ids, tw)
    with pytest.raises(fusedmoe.InvalidArgument, match=r"'w13_weight': expected shape \[4,256,256\], got \[4,256,254\]"):
        fusedmoe.MoELayer(cfg, dict(w, w13_weight=np.ascontiguousarray(w["w13_weight"][:, :, :-2])))
    with pytest.raises(fusedmoe.InvalidArgument, match="'format': expected one of"):
        fusedmoe.MoELayer("bf17", w)
    with pytest.raises(fusedmoe.InvalidArgument, match="'weights': expected names"):
        fusedmoe.MoELayer(cfg, dict(w, w3_weight=w["w2_weight"]))
    with pytest.raises(fusedmoe.InvalidArgument, match="'weights': expected CUDA tensors for the CUDA backend"):
        fusedmoe.MoELayer(cfg, w, backend="cuda")
    with pytest.raises(fusedmoe.InvalidArgument, match="an array exporting DLPack"):
        layer([[1.0]], ids, tw)
    with pytest.raises(fusedmoe.InvalidArgument, match="'hidden_states'.*uint16"):
        layer(np.zeros((M, K), np.uint16), ids, tw, output=np.zeros((M, K), np.float32))


def test_a_failed_layer_construction_releases_the_weights():
    # The core imports every weight before the Layer validates them; a constructor that throws must
    # drop those references (nanobind runs no destructor for a failed __init__).
    cfg, w, _ = make_layer("fp32", E, 64, 32)
    bad = np.ascontiguousarray(w["w13_weight"][:, :, :-2])
    w13, w2 = w["w13_weight"].copy(), w["w2_weight"].copy()
    refs = [weakref.ref(bad), weakref.ref(w13), weakref.ref(w2)]
    with pytest.raises(fusedmoe.InvalidArgument, match="'w13_weight': expected shape"):
        fusedmoe.MoELayer(cfg, dict(w13_weight=bad, w2_weight=w2))
    with pytest.raises(fusedmoe.InvalidArgument, match="'weights': expected CUDA tensors"):
        fusedmoe.MoELayer(cfg, dict(w13_weight=w13, w2_weight=w2), backend="cuda")
    del bad, w13, w2
    gc.collect()
    assert [r() is None for r in refs] == [True, True, True]  # no reference left behind


def test_a_deleted_layer_releases_its_weights_and_runs_until_then():
    cfg, w, _ = make_layer("fp32", E, 64, 32)
    w13, w2 = w["w13_weight"].copy(), w["w2_weight"].copy()
    refs = [weakref.ref(w13), weakref.ref(w2)]
    layer = fusedmoe.MoELayer(cfg, dict(w13_weight=w13, w2_weight=w2))
    ids, tw = routing(M, E, TOPK)
    del w13, w2
    gc.collect()
    assert all(r() is not None for r in refs)  # the layer keeps the arrays it views
    assert np.isfinite(layer(_x(k=64), ids, tw)).all()
    with pytest.raises(fusedmoe.InvalidArgument, match=r"'hidden_states': expected shape \[M,64\], got \[7,65\]"):
        layer(_x(k=65), ids, tw)
    del layer
    gc.collect()
    assert [r() is None for r in refs] == [True, True]


def test_cuda_available_needs_a_device():
    # A CUDA build on a machine without a GPU: built in, but not usable.
    assert fusedmoe.cuda_available() == fusedmoe.backend_available("cuda")
    if not fusedmoe.built_with_cuda:
        assert not fusedmoe.cuda_available()
    elif not glob.glob("/dev/nvidia[0-9]*"):
        assert not fusedmoe.cuda_available()


def test_unsupported_is_a_not_implemented_error():
    assert issubclass(fusedmoe.Unsupported, NotImplementedError)
    assert issubclass(fusedmoe.Unsupported, fusedmoe.FusedMoEError)
    assert issubclass(fusedmoe.InvalidArgument, ValueError)
    assert issubclass(fusedmoe.FusedMoEError, RuntimeError)


@pytest.mark.skipif(fusedmoe.built_with_cuda, reason="checks the CPU-only build's refusal of CUDA tensors")
def test_cuda_tensors_in_a_cpu_only_build_raise_unsupported():
    # Raw descriptors (ptr, dtype, shape, strides, device_type 1 = CUDA, index) stand in for CUDA
    # arrays: the build without CUDA must refuse them with Unsupported, before touching memory.
    from fusedmoe import _core

    def cuda(dtype, shape):
        strides, acc = [], 1
        for d in reversed(shape):
            strides.insert(0, acc)
            acc *= d
        return (0x1000, dtype, tuple(shape), tuple(strides), 1, 0)

    weights = {"w13_weight": cuda("BF16", (E, 2 * N, K)), "w2_weight": cuda("BF16", (E, K, N))}
    with pytest.raises(fusedmoe.Unsupported, match="built without CUDA"):
        _core.Layer(weights, {"format": "bf16"})
    with pytest.raises(fusedmoe.Unsupported, match="built without CUDA"):
        _core.route(cuda("F32", (M, E)), cuda("I32", (M, 2)), cuda("F32", (M, 2)))
    assert not fusedmoe.cuda_available()


def test_workspace_size_can_implement_and_properties():
    cfg, w, _ = make_layer("fp8-block", E, K, N)
    layer = fusedmoe.MoELayer(cfg, w)
    assert layer.backend == "cpu" and layer.device == ("cpu", 0)
    assert (layer.num_experts, layer.hidden, layer.inter) == (E, K, N)
    assert layer.workspace_size(64, 8) == 0 and fusedmoe.workspace_size(layer, 64, 8) == 0
    assert layer.can_implement(64, 8) == fusedmoe.Support(True, "")
    assert layer.config.format == "fp8-block"
    assert "MoELayer(fp8-block" in repr(layer)
    layer.warmup(16, 2)


def test_fused_moe_functional_caches_layers():
    fusedmoe.clear_layer_cache()
    from fusedmoe import _layer

    cfg, w, _ = make_layer("fp8-channel", E, K, N)
    ids, tw = routing(M, E, TOPK)
    x = bf16(_x())
    a = fusedmoe.fused_moe(x, w["w13_weight"], w["w2_weight"], tw, ids, format="fp8-channel",
                           w13_weight_scale=w["w13_weight_scale"], w2_weight_scale=w["w2_weight_scale"])
    n = len(_layer._cache)
    b = fusedmoe.fused_moe(x, w["w13_weight"], w["w2_weight"], tw, ids, format="fp8-channel",
                           w13_weight_scale=w["w13_weight_scale"], w2_weight_scale=w["w2_weight_scale"])
    assert len(_layer._cache) == n == 1
    np.testing.assert_array_equal(a.array, b.array)
    np.testing.assert_array_equal(a.array, fusedmoe.MoELayer(cfg, w)(x, ids, tw).array)
    fw = make_layer("bf16", E, K, N)[1]
    fusedmoe.fused_moe(x, fw["w13_weight"], fw["w2_weight"], tw, ids, format="bf16")
    assert len(_layer._cache) == 2
    with pytest.raises(fusedmoe.InvalidArgument, match="'format'"):
        fusedmoe.fused_moe(x, w["w13_weight"], w["w2_weight"], tw, ids)
    fusedmoe.set_layer_cache_size(1)
    assert len(_layer._cache) == 1
    fusedmoe.set_layer_cache_size(256)
    fusedmoe.clear_layer_cache()
    assert len(_layer._cache) == 0


def test_fp8_tensor_static_scales_and_swizzled_nvfp4_weights():
    # fp8-tensor with static input scales stored by the quantiser.
    cfg = fusedmoe.LayerConfig("fp8-tensor")
    fl = fusedmoe.random_float_layer(cfg, E, K, N, seed=2)
    qc, w = fusedmoe.quantize_layer(cfg, fl["w13"], fl["w2"], fp8_w13_input_scale=4.0 / 448, fp8_w2_input_scale=0.5 / 448)
    assert w["w13_input_scale"].shape == (1,)
    ids, tw = routing(M, E, TOPK)
    fusedmoe.MoELayer(qc, w)(bf16(_x()), ids, tw)
    # nvfp4 with the block scales in the swizzled layout gives the same bits as linear.
    qc, w, _ = make_layer("nvfp4", E, K, N)
    sw = dict(w, w13_weight_scale=fusedmoe.swizzle_scales_128x4(w["w13_weight_scale"]),
              w2_weight_scale=fusedmoe.swizzle_scales_128x4(w["w2_weight_scale"]))
    lin = fusedmoe.MoELayer(qc, w)(bf16(_x()), ids, tw)
    swz = fusedmoe.MoELayer(fusedmoe.LayerConfig("nvfp4", weight_scale_layout="swizzled_128x4"), sw)(bf16(_x()), ids, tw)
    np.testing.assert_array_equal(lin.array, swz.array)


def test_layer_files_round_trip(tmp_path):
    cfg, w, fw = make_layer("mxfp4", E, K, N, bias=True)
    path = tmp_path / "layer.safetensors"
    fusedmoe.write_layer_file(str(path), cfg, w)
    cfg2, w2 = fusedmoe.read_layer_file(str(path))
    assert cfg2 == cfg and set(w2) == set(w)
    for name in w:
        np.testing.assert_array_equal(w2[name], w[name])
    back = fusedmoe.dequantize_layer(cfg2, w2)
    np.testing.assert_array_equal(back["w13"], fw["w13"])
    with pytest.raises(fusedmoe.FusedMoEError):
        fusedmoe.read_layer_file(str(tmp_path / "missing.safetensors"))


def test_run_timed_returns_stage_times():
    cfg, w, _ = make_layer("bf16", E, K, N)
    ids, tw = routing(M, E, TOPK)
    out, times = fusedmoe.MoELayer(cfg, w).run_timed(_x(), ids, tw)
    assert out.shape == (M, K) and set(times) >= {"permute_ms", "gemm1_ms", "gemm2_ms", "finalize_ms", "total_ms"}
    assert times["total_ms"] >= 0


def test_w4a8_int32_packed_weights():
    cfg, w, fw = make_layer("w4a8-int4", E, K, N)
    ids, tw = routing(M, E, TOPK)
    x = bf16(_x())
    ref = fusedmoe.MoELayer(cfg, w)(x, ids, tw)
    # The same bytes viewed as int32 (eight int4 per int32, vLLM's packing): no copy, same result.
    w32 = dict(w, w13_weight=w["w13_weight"].view(np.int32), w2_weight=w["w2_weight"].view(np.int32))
    np.testing.assert_array_equal(fusedmoe.MoELayer(cfg, w32)(x, ids, tw).array, ref.array)


def test_w4a8_uint4b8_encoding():
    cfg, w, fw = make_layer("w4a8-int4", E, K, N)
    ids, tw = routing(M, E, TOPK)
    x = bf16(_x())
    ref = fusedmoe.MoELayer(cfg, w)(x, ids, tw)
    # Same values stored as q + 8 (uint4b8), viewed as int32 (eight per int32): no copy, same result.
    def to_b8(packed):
        lo = (packed & 0xF) ^ 0x8
        hi = ((packed >> 4) & 0xF) ^ 0x8
        return (lo | (hi << 4)).astype(np.uint8)
    w8 = dict(w, w13_weight=to_b8(w["w13_weight"]).view(np.int32), w2_weight=to_b8(w["w2_weight"]).view(np.int32))
    out = fusedmoe.MoELayer(fusedmoe.LayerConfig("w4a8-int4", int4_encoding="uint4b8"), w8)(x, ids, tw)
    np.testing.assert_array_equal(out.array, ref.array)
