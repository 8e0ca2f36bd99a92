"""The drop-ins (fusedmoe.seeds, fusedmoe.vllm_experts) on the CPU with NumPy arrays, against
MoELayer on the same weights in fusedmoe's own conventions: the seeds' semantics (FlashInfer's
[up; gate] order, the FP8 scale list, NVFP4 global scales and swizzled int32 block scales, vLLM's
transposed weights, expert parallelism) must give the same output bits."""

import warnings

import numpy as np
import pytest

import fusedmoe
from fusedmoe import seeds
from fusedmoe.vllm_experts import FusedMoEExperts
from moe_reference import bf16, routing, to_float

M, E, K, N, TOPK = 6, 4, 256, 128, 2


def _x(seed=3):
    return np.random.default_rng(seed).standard_normal((M, K)).astype(np.float32)


def _float_layer(act="silu", seed=1, bias=False):
    cfg = fusedmoe.LayerConfig("fp32", activation=act)
    return cfg, fusedmoe.random_float_layer(cfg, E, K, N, seed=seed, with_bias=bias)


def _quant(fmt, act="silu", bias=False, **kw):
    cfg, fl = _float_layer(act, bias=bias)
    return fusedmoe.quantize_layer(cfg, fl["w13"], fl["w2"], fl.get("w13_bias"), fl.get("w2_bias"), format=fmt, **kw)


def _swap_halves(w):
    """[gate; up] <-> [up; gate] along dim 1 (rows of w13 or of its row-wise scales)."""
    r = w.shape[1] // 2
    return np.ascontiguousarray(np.concatenate([w[:, r:], w[:, :r]], axis=1))


def _bits(a):
    """Raw bits of a bf16 result (fusedmoe.Typed, or an ml_dtypes bfloat16 array)."""
    if isinstance(a, fusedmoe.Typed):
        return a.array
    return a.view(np.uint16) if a.dtype.itemsize == 2 and a.dtype.kind not in "fiu" else a


def _fp8(a):
    return fusedmoe.as_dtype(a, "fp8")


# ---- FlashInfer cutlass_fused_moe ------------------------------------------------------------

@pytest.mark.parametrize("bias", [False, True])
def test_flashinfer_unquantised_up_gate_order(bias):
    cfg, w = _quant("fp32", bias=bias)
    ids, tw = routing(M, E, TOPK)
    x = _x()
    ref = fusedmoe.MoELayer(cfg, w)(x, ids, tw)
    out = seeds.cutlass_fused_moe(x, ids, tw, _swap_halves(w["w13_weight"]), w["w2_weight"], np.float32, [],
                                  fc1_expert_biases=_swap_halves(w["w13_bias"]) if bias else None,
                                  fc2_expert_biases=w.get("w2_bias"))
    np.testing.assert_array_equal(out, ref)
    # A preallocated output of another dtype is filled by conversion.
    out16 = np.zeros((M, K), np.float16)
    res = seeds.cutlass_fused_moe(x, ids, tw, _swap_halves(w["w13_weight"]), w["w2_weight"], np.float16, None,
                                  fc1_expert_biases=_swap_halves(w["w13_bias"]) if bias else None,
                                  fc2_expert_biases=w.get("w2_bias"), output=out16)
    assert res is out16
    np.testing.assert_array_equal(out16, ref.astype(np.float16))


def test_flashinfer_fp8_quant_scales_list_and_prequantised_input():
    a1, a2 = 2.0 ** -6, 2.0 ** -8  # powers of two: the scale products are exact
    cfg, w = _quant("fp8-tensor", fp8_w13_input_scale=a1, fp8_w2_input_scale=a2)
    ids, tw = routing(M, E, TOPK)
    xb = bf16(_x())
    ref = fusedmoe.MoELayer(cfg, w)(xb, ids, tw)
    s1, s2 = w["w13_weight_scale"], w["w2_weight_scale"]
    quant_scales = [s1 * a1, np.array([1.0 / a2], np.float32), s2 * a2, np.array([a1], np.float32)]
    fc1 = _fp8(_swap_halves(w["w13_weight"]))
    fc2 = _fp8(w["w2_weight"])
    out = seeds.cutlass_fused_moe(xb, ids, tw, fc1, fc2, "bf16", quant_scales)
    np.testing.assert_array_equal(_bits(out), _bits(ref))
    # FlashInfer's FP8 path takes the input quantised with a1: same result.
    q, _ = fusedmoe.quantize_fp8_per_tensor(to_float(xb), scale=a1)
    out_q = seeds.cutlass_fused_moe(_fp8(q), ids, tw, fc1, fc2, "bf16", quant_scales)
    np.testing.assert_array_equal(_bits(out_q), _bits(ref))


def _nvfp4_flashinfer_args(w):
    """FlashInfer's views of a fusedmoe nvfp4 layer: [up; gate] fc1, int64 weight views, swizzled
    block scales as int32, global scales as quant_scales."""
    fc1 = _swap_halves(w["w13_weight"]).view(np.int64)
    fc2 = np.ascontiguousarray(w["w2_weight"]).view(np.int64)
    sf1 = fusedmoe.swizzle_scales_128x4(_swap_halves(w["w13_weight_scale"])).view(np.int32)
    sf2 = fusedmoe.swizzle_scales_128x4(w["w2_weight_scale"]).view(np.int32)
    in1, in2 = w["w13_input_scale"], w["w2_input_scale"]
    a1_gs = np.array([1.0 / in1[0]], np.float32)
    a2_gs = np.array([1.0 / in2[0]], np.float32)
    g1 = (in1 * w["w13_weight_scale_2"]).astype(np.float32)
    g2 = (in2 * w["w2_weight_scale_2"]).astype(np.float32)
    return fc1, fc2, [a1_gs, sf1, g1, a2_gs, sf2, g2]


def test_flashinfer_nvfp4_global_scales_and_swizzled_int32_block_scales():
    amax = 5.25  # input_scale = amax / (448 * 6) = 2^-9: exact reciprocals
    cfg, w = _quant("nvfp4", act_dtype="nvfp4", nvfp4_w13_act_amax=amax, nvfp4_w2_act_amax=amax)
    assert w["w13_input_scale"][0] == 2.0 ** -9
    ids, tw = routing(M, E, TOPK)
    xb = bf16(_x())
    ref = fusedmoe.MoELayer(cfg, w)(xb, ids, tw)
    fc1, fc2, qs = _nvfp4_flashinfer_args(w)
    assert fc1.shape == (E, 2 * N, K // 16) and qs[1].shape == (E, 2 * N, K // 16 // 4)
    out = seeds.cutlass_fused_moe(xb, ids, tw, fc1, fc2, "bf16", qs)
    np.testing.assert_array_equal(_bits(out), _bits(ref))
    # Input already quantised to NVFP4 with a1_gscale, scales swizzled (FlashInfer's fp4_quantize).
    q, sf, _ = fusedmoe.quantize_nvfp4(to_float(xb), global_scale=float(qs[0][0]))
    out_q = seeds.cutlass_fused_moe(q, ids, tw, fc1, fc2, "bf16", qs,
                                    input_sf=fusedmoe.swizzle_scales_128x4(sf).reshape(-1))
    np.testing.assert_array_equal(_bits(out_q), _bits(ref))
    out_l = seeds.cutlass_fused_moe(q, ids, tw, fc1, fc2, "bf16", qs, input_sf=sf[:, :] if M % 128 else sf)
    np.testing.assert_array_equal(_bits(out_l), _bits(ref))


def test_flashinfer_deepseek_fp8_block_scales():
    cfg, w = _quant("fp8-block")
    ids, tw = routing(M, E, TOPK)
    xb = bf16(_x())
    ref = fusedmoe.MoELayer(cfg, w)(xb, ids, tw)
    out = seeds.cutlass_fused_moe(xb, ids, tw, _fp8(_swap_halves(w["w13_weight"])), _fp8(w["w2_weight"]), "bf16",
                                  [_swap_halves(w["w13_weight_scale"]), w["w2_weight_scale"]],
                                  use_deepseek_fp8_block_scale=True)
    np.testing.assert_array_equal(_bits(out), _bits(ref))


def test_flashinfer_expert_parallel_ranks():
    cfg, w = _quant("fp32")
    rng = np.random.default_rng(9)
    ids = rng.integers(0, 2 * E, (M, 3)).astype(np.int32)  # global ids over 2 ranks
    tw = rng.random((M, 3)).astype(np.float32)
    x = _x()
    fc1 = _swap_halves(w["w13_weight"])
    for rank in (0, 1):
        emap = np.full(2 * E, -1, np.int32)
        emap[rank * E:(rank + 1) * E] = np.arange(E, dtype=np.int32)
        ref = fusedmoe.MoELayer(cfg, w)(x, ids, tw, expert_map=emap)
        out = seeds.cutlass_fused_moe(x, ids, tw, fc1, w["w2_weight"], np.float32, None, ep_size=2, ep_rank=rank)
        np.testing.assert_array_equal(out, ref)


def test_flashinfer_swiglu_bias_and_relu2_activation_types():
    cfg, w = _quant("fp32", act="swigluoai")
    ids, tw = routing(M, E, TOPK)
    x = _x()
    ref = fusedmoe.MoELayer(fusedmoe.LayerConfig("fp32", activation="swigluoai", swiglu_alpha=1.5, swiglu_limit=5.0),
                            w)(x, ids, tw)
    alpha = np.full(E, 1.5, np.float32)
    out = seeds.cutlass_fused_moe(x, ids, tw, _swap_halves(w["w13_weight"]), w["w2_weight"], np.float32, None,
                                  activation_type="SwigluBias", swiglu_alpha=alpha, swiglu_limit=5.0,
                                  swiglu_beta=np.ones(E, np.float32))
    np.testing.assert_array_equal(out, ref)
    cfg2, w2 = _quant("fp32", act="relu2")
    out = seeds.cutlass_fused_moe(x, ids, tw, w2["w13_weight"], w2["w2_weight"], np.float32, None, activation_type=6)
    np.testing.assert_array_equal(out, fusedmoe.MoELayer(cfg2, w2)(x, ids, tw))
    with pytest.raises(NotImplementedError, match="Geglu"):
        seeds.cutlass_fused_moe(x, ids, tw, w["w13_weight"], w["w2_weight"], np.float32, None, activation_type="Geglu")


@pytest.mark.parametrize("flag", ["min_latency_mode", "enable_alltoall", "use_w4a8_group_scaling",
                                  "use_mxfp8_act_scaling"])
def test_flashinfer_unsupported_options_raise(flag):
    cfg, w = _quant("fp32")
    ids, tw = routing(M, E, TOPK)
    with pytest.raises(fusedmoe.Unsupported):
        seeds.cutlass_fused_moe(_x(), ids, tw, w["w13_weight"], w["w2_weight"], np.float32, None, **{flag: True})


# ---- vLLM --------------------------------------------------------------------------------------

def test_vllm_cutlass_moe_fp8_transposed_weights_and_scale_kinds():
    ids, tw = routing(M, E, TOPK)
    xb = bf16(_x())
    # per-tensor weights, dynamic per-tensor activations; weights passed transposed as vLLM does
    cfg, w = _quant("fp8-tensor")
    ref = fusedmoe.MoELayer(cfg, w)(xb, ids, tw)
    qc = seeds.FusedMoEQuantConfig(w1_scale=w["w13_weight_scale"], w2_scale=w["w2_weight_scale"])
    w1t, w2t = w["w13_weight"].swapaxes(1, 2), w["w2_weight"].swapaxes(1, 2)
    out = seeds.cutlass_moe_fp8(xb, w1t, w2t, tw, ids, None, None, None, None, qc)
    np.testing.assert_array_equal(_bits(out), _bits(ref))
    # per-channel weights with per-token activations
    cfg, w = _quant("fp8-channel")
    ref = fusedmoe.MoELayer(cfg, w)(xb, ids, tw)
    qc = seeds.FusedMoEQuantConfig(w1_scale=w["w13_weight_scale"][..., None], w2_scale=w["w2_weight_scale"][..., None],
                                   per_act_token_quant=True, per_out_ch_quant=True)
    out = seeds.cutlass_moe_fp8(xb, w["w13_weight"].swapaxes(1, 2), w["w2_weight"].swapaxes(1, 2), tw, ids,
                                None, None, None, None, qc)
    np.testing.assert_array_equal(_bits(out), _bits(ref))
    # per-tensor weights with per-token activations = fp8-channel with broadcast scales
    cfg, w = _quant("fp8-tensor")
    rows = lambda s, r: np.repeat(s[:, None], r, axis=1).astype(np.float32)  # noqa: E731
    wc = dict(w13_weight=w["w13_weight"], w2_weight=w["w2_weight"],
              w13_weight_scale=rows(w["w13_weight_scale"], 2 * N), w2_weight_scale=rows(w["w2_weight_scale"], K))
    ref = fusedmoe.MoELayer("fp8-channel", wc)(xb, ids, tw)
    qc = seeds.FusedMoEQuantConfig(w1_scale=w["w13_weight_scale"], w2_scale=w["w2_weight_scale"], per_act_token_quant=True)
    out = seeds.cutlass_moe_fp8(xb, w["w13_weight"], w["w2_weight"], tw, ids, None, None, None, None, qc)
    np.testing.assert_array_equal(_bits(out), _bits(ref))
    # per-channel weights with a per-tensor activation scale: not a fusedmoe format
    qc = seeds.FusedMoEQuantConfig(w1_scale=np.ones((E, 2 * N), np.float32), w2_scale=np.ones((E, K), np.float32),
                                   per_out_ch_quant=True)
    with pytest.raises(NotImplementedError, match="per-channel weight scales with per-tensor"):
        seeds.cutlass_moe_fp8(xb, w["w13_weight"], w["w2_weight"], tw, ids, None, None, None, None, qc)


def test_vllm_cutlass_moe_fp8_static_scales_expert_map_and_router_weight_on_input():
    a1, a2 = 2.0 ** -6, 2.0 ** -8
    cfg, w = _quant("fp8-tensor", fp8_w13_input_scale=a1, fp8_w2_input_scale=a2)
    rng = np.random.default_rng(4)
    ids = rng.integers(0, 2 * E, (M, 1)).astype(np.int32)
    tw = rng.random((M, 1)).astype(np.float32)
    emap = np.concatenate([np.arange(E), np.full(E, -1)]).astype(np.int32)
    xb = bf16(_x())
    ref = fusedmoe.MoELayer(cfg, w)(xb, ids, tw, expert_map=emap, apply_router_weight_on_input=True)
    qc = seeds.FusedMoEQuantConfig(w1_scale=w["w13_weight_scale"], w2_scale=w["w2_weight_scale"],
                                   a1_scale=np.float32(a1), a2_scale=np.array([a2], np.float32))
    out = seeds.cutlass_moe_fp8(xb, w["w13_weight"], w["w2_weight"], tw, ids, None, None, None, None, qc,
                                expert_map=emap, apply_router_weight_on_input=True, global_num_experts=2 * E)
    np.testing.assert_array_equal(_bits(out), _bits(ref))


def test_vllm_cutlass_moe_w4a8_int32_weights_and_bf16_group_scales():
    cfg, w = _quant("w4a8-int4")
    ids, tw = routing(M, E, TOPK)
    xb = bf16(_x())
    ref = fusedmoe.MoELayer(cfg, w)(xb, ids, tw)
    w1, w2 = w["w13_weight"].view(np.int32), w["w2_weight"].view(np.int32)
    assert w1.shape == (E, 2 * N, K // 8)
    qc = seeds.FusedMoEQuantConfig(w1_scale=w["w13_weight_scale"], w2_scale=w["w2_weight_scale"],
                                   per_act_token_quant=True, per_out_ch_quant=True)
    out = seeds.cutlass_moe_w4a8_fp8(xb, w1, w2, tw, ids, *([None] * 8), qc, None, int4_encoding="signed")
    np.testing.assert_array_equal(_bits(out), _bits(ref))
    bad = seeds.FusedMoEQuantConfig(w1_scale=_fp8(np.ones((E, 2 * N, 2), np.uint8)), w2_scale=w["w2_weight_scale"])
    with pytest.raises(NotImplementedError, match="bf16 checkpoint group scales"):
        seeds.cutlass_moe_w4a8_fp8(xb, w1, w2, tw, ids, *([None] * 8), bad, None)
    with pytest.raises(NotImplementedError, match="group_size"):
        seeds.cutlass_moe_w4a8_fp8(xb, w1, w2, tw, ids, *([None] * 8), qc, None, group_size=64)


def test_vllm_run_cutlass_moe_fp4_swizzled_scales():
    amax = 5.25
    cfg, w = _quant("nvfp4", act_dtype="nvfp4", nvfp4_w13_act_amax=amax, nvfp4_w2_act_amax=amax)
    ids, tw = routing(M, E, TOPK)
    xb = bf16(_x())
    ref = fusedmoe.MoELayer(cfg, w)(xb, ids, tw)
    in1, in2 = w["w13_input_scale"], w["w2_input_scale"]
    a1_gs, a2_gs = (1.0 / in1).astype(np.float32), (1.0 / in2).astype(np.float32)
    sf1 = fusedmoe.swizzle_scales_128x4(w["w13_weight_scale"]).reshape(E, -1)  # any shape with the bytes
    sf2 = fusedmoe.swizzle_scales_128x4(w["w2_weight_scale"])
    out = fusedmoe.as_dtype(np.zeros((M, K), np.uint16), "bf16")
    res = seeds.run_cutlass_moe_fp4(out, xb, a1_gs, w["w13_weight"], sf1, (in1 * w["w13_weight_scale_2"]).astype(np.float32),
                                    a2_gs, w["w2_weight"], sf2, (in2 * w["w2_weight_scale_2"]).astype(np.float32),
                                    tw, ids, "silu", None, None, M, N, K, E, "cpu")
    assert res is None
    np.testing.assert_array_equal(_bits(out), _bits(ref))
    # linear block scales, forced
    out2 = fusedmoe.as_dtype(np.zeros((M, K), np.uint16), "bf16")
    seeds.run_cutlass_moe_fp4(out2, xb, a1_gs, w["w13_weight"], w["w13_weight_scale"],
                              (in1 * w["w13_weight_scale_2"]).astype(np.float32), a2_gs, w["w2_weight"],
                              w["w2_weight_scale"], (in2 * w["w2_weight_scale_2"]).astype(np.float32),
                              tw, ids, "silu", None, None, M, N, K, E, "cpu", blockscale_layout="linear")
    np.testing.assert_array_equal(_bits(out2), _bits(ref))


def test_vllm_run_cutlass_moe_mxfp4_and_swizzle_mxfp4_scales():
    cfg, w = _quant("mxfp4")
    ids, tw = routing(M, E, TOPK)
    xb = bf16(_x())
    ref = fusedmoe.MoELayer(cfg, w)(xb, ids, tw)
    sw1 = np.stack([seeds.swizzle_mxfp4_scales(w["w13_weight_scale"][e], 2 * N, K) for e in range(E)])
    sw2 = np.stack([seeds.swizzle_mxfp4_scales(w["w2_weight_scale"][e], K, N) for e in range(E)])
    assert sw1.ndim == 2 and sw1.shape[1] == 2 * N * (K // 32) // 4 * 4  # flat per expert, no padding here
    out = fusedmoe.as_dtype(np.zeros((M, K), np.uint16), "bf16")
    seeds._MXFP4_ACT_WARNED = False
    with pytest.warns(UserWarning, match="MXFP4 activations"):
        seeds.run_cutlass_moe_mxfp4(out, xb, w["w13_weight"], sw1, w["w2_weight"], sw2, tw, ids, "silu", None, None,
                                    M, N, K, E, "cpu")
    np.testing.assert_array_equal(_bits(out), _bits(ref))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        seeds.run_cutlass_moe_mxfp4(out, xb, w["w13_weight"], sw1, w["w2_weight"], sw2, tw, ids, "silu", None, None,
                                    M, N, K, E, "cpu", act_dtype="bf16")


def test_swizzle_mxfp4_scales_is_flat_and_padded():
    flat = np.random.default_rng(0).integers(0, 255, (200, 5)).astype(np.uint8)  # N=200, K=160
    out = seeds.swizzle_mxfp4_scales(flat, 200, 160)
    assert out.shape == (256 * 8,) and out.dtype == np.uint8
    np.testing.assert_array_equal(out.reshape(256, 8), fusedmoe.swizzle_scales_128x4(flat))


def test_vllm_deep_gemm_moe_fp8_block_and_inplace():
    cfg, w = _quant("fp8-block")
    ids, tw = routing(M, E, TOPK)
    x = _x()
    xb = to_float(bf16(x)).astype(np.float32)
    ref = fusedmoe.MoELayer(cfg, w)(xb, ids, tw)
    out = seeds.deep_gemm_moe_fp8(xb, w["w13_weight"], w["w2_weight"], w["w13_weight_scale"], w["w2_weight_scale"],
                                  tw, ids)
    np.testing.assert_array_equal(out, ref)
    h = xb.copy()
    res = seeds.deep_gemm_moe_fp8(h, w["w13_weight"].swapaxes(1, 2), w["w2_weight"], w["w13_weight_scale"],
                                  w["w2_weight_scale"], tw, ids, inplace=True)
    assert res is h
    np.testing.assert_array_equal(h, ref)
    with pytest.raises(NotImplementedError, match="static activation scales"):
        seeds.deep_gemm_moe_fp8(xb, w["w13_weight"], w["w2_weight"], w["w13_weight_scale"], w["w2_weight_scale"],
                                tw, ids, a1_scale=np.ones(1, np.float32))


# ---- vLLM modular-kernel experts class ---------------------------------------------------------

def test_vllm_experts_class_workspace_shapes_and_apply():
    ids, tw = routing(M, E, TOPK)
    xb = bf16(_x())
    ex = FusedMoEExperts()
    assert ex.workspace_shapes(M, N, K, TOPK, E, E, None, "silu") == ((M, K), (0,), (M, K))
    assert ex.supports_expert_map() and ex.supports_chunking() and ex.expects_unquantized_inputs()
    cfg, w = _quant("bf16")
    w = {k: fusedmoe.as_dtype(v, "bf16") for k, v in w.items()}  # NumPy: bf16 weights as tagged raw bits
    out = fusedmoe.as_dtype(np.zeros((M, K), np.uint16), "bf16")
    ex.apply(out, xb, w["w13_weight"], w["w2_weight"], tw, ids, "silu", E, None, None, None, None, None, None, False)
    np.testing.assert_array_equal(_bits(out), fusedmoe.MoELayer(cfg, w)(xb, ids, tw).array)

    cfg, w = _quant("fp8-block")
    qc = seeds.FusedMoEQuantConfig(quant_dtype="float8_e4m3fn", block_shape=[128, 128], w1_scale=w["w13_weight_scale"],
                                   w2_scale=w["w2_weight_scale"])
    ex = FusedMoEExperts(None, qc)
    ex.apply(out, xb, w["w13_weight"], w["w2_weight"], tw, ids, "silu", E, None, None, None, None, None, None, False)
    np.testing.assert_array_equal(_bits(out), fusedmoe.MoELayer(cfg, w)(xb, ids, tw).array)

    amax = 5.25
    cfg, w = _quant("nvfp4", act_dtype="nvfp4", nvfp4_w13_act_amax=amax, nvfp4_w2_act_amax=amax)
    in1, in2 = w["w13_input_scale"], w["w2_input_scale"]
    qc = seeds.FusedMoEQuantConfig(quant_dtype="nvfp4", w1_scale=fusedmoe.swizzle_scales_128x4(w["w13_weight_scale"]),
                                   w2_scale=fusedmoe.swizzle_scales_128x4(w["w2_weight_scale"]),
                                   a1_gscale=(1.0 / in1).astype(np.float32), a2_gscale=(1.0 / in2).astype(np.float32),
                                   g1_alphas=(in1 * w["w13_weight_scale_2"]).astype(np.float32),
                                   g2_alphas=(in2 * w["w2_weight_scale_2"]).astype(np.float32))
    ex = FusedMoEExperts(None, qc)
    ex.apply(out, xb, w["w13_weight"], w["w2_weight"], tw, ids, "silu", E, None, None, None, None, None, None, False)
    np.testing.assert_array_equal(_bits(out), fusedmoe.MoELayer(cfg, w)(xb, ids, tw).array)
    with pytest.raises(NotImplementedError):
        ex.moe_sum(None, None)
