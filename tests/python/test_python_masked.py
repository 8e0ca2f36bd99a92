"""Pre-quantised fp8-block inputs, the batched / masked layout (run_masked) and warmup, on the CPU
with NumPy (a torch CPU section runs when PyTorch is installed): pre-quantised equals the
in-layer quantisation bit for bit, masked equals the contiguous layer (top-1, weight 1) bit for
bit, rows past the count are zeros, bad arguments raise InvalidArgument naming the argument."""

import types

import numpy as np
import pytest

import fusedmoe
from fusedmoe import seeds
from fusedmoe.vllm_experts import FusedMoEBatchedExperts, FusedMoEExperts
from moe_reference import bf16, make_layer, routing, to_float

M, E, K, N, TOPK, T = 9, 4, 256, 128, 2, 5
# K not a multiple of 128: a ragged last scale group.
K_RAGGED = 200


def _x(shape, seed=3):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _bits(a):
    """Comparable raw bits of an output (Typed bf16, ml_dtypes, float16 / float32 arrays)."""
    if isinstance(a, fusedmoe.Typed):
        return np.asarray(a.array)
    a = np.asarray(a)
    return a.view("uint%d" % (8 * a.dtype.itemsize))


def _act_input(x, act):
    """x in the activation dtype (``bf16`` / ``fp16`` / ``fp32``) as fusedmoe takes it."""
    return {"bf16": lambda: bf16(x), "fp16": lambda: x.astype(np.float16), "fp32": lambda: x}[act]()


# ---- pre-quantised fp8-block inputs -------------------------------------------------------------

@pytest.mark.parametrize("act_dtype", ["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("ue8m0", [False, True])
@pytest.mark.parametrize("k", [K, K_RAGGED])
def test_prequantized_equals_in_layer_quantisation_bitwise(act_dtype, ue8m0, k):
    cfg, w, _ = make_layer("fp8-block", E, k, N, bias=True, fp8_block_ue8m0=ue8m0)
    layer = fusedmoe.MoELayer(cfg, w)
    ids, tw = routing(M, E, TOPK)
    xin = _act_input(_x((M, k)), act_dtype)
    ref = layer(xin, ids, tw)
    q, s = fusedmoe.quantize_fp8_per_token_group(xin, 128, ue8m0=ue8m0)
    assert q.dtype == np.uint8 and s.shape == (M, -(-k // 128))
    # raw uint8 codes are taken as F8_E4M3 when scales come with them; out_dtype names the dtype
    out = layer(q, ids, tw, hidden_states_scale=s, out_dtype=act_dtype)
    np.testing.assert_array_equal(_bits(out), _bits(ref))
    # tagged codes and a caller's output array (its dtype is the activation dtype)
    out2 = fusedmoe.MoELayer(cfg, w).run(fusedmoe.as_dtype(q, "fp8"), ids, tw, hidden_states_scale=s,
                                         output=fusedmoe.as_dtype(np.zeros_like(_bits(ref)), act_dtype)
                                         if act_dtype == "bf16" else np.zeros_like(ref))
    np.testing.assert_array_equal(_bits(out2), _bits(ref))
    # the functional form and the oracle agree as well
    out3 = fusedmoe.fused_moe(q, w["w13_weight"], w["w2_weight"], tw, ids, format="fp8-block",
                              fp8_block_ue8m0=ue8m0, w13_weight_scale=w["w13_weight_scale"],
                              w2_weight_scale=w["w2_weight_scale"], w13_bias=w["w13_bias"], w2_bias=w["w2_bias"],
                              hidden_states_scale=s, out_dtype=act_dtype)
    np.testing.assert_array_equal(_bits(out3), _bits(ref))
    oracle = fusedmoe.MoELayer(cfg, w, cpu_precision="oracle")
    np.testing.assert_array_equal(_bits(oracle(q, ids, tw, hidden_states_scale=s, out_dtype=act_dtype)),
                                  _bits(oracle(xin, ids, tw)))


def test_prequantized_scales_are_used_as_given():
    """Scales are not re-derived: doubling every scale doubles GEMM1's operand (silu is not linear,
    so compare against the layer run on the dequantised input instead)."""
    cfg, w, _ = make_layer("fp8-block", E, K, N, act="relu2")
    layer = fusedmoe.MoELayer(cfg, w, cpu_precision="oracle")
    ids, tw = routing(M, E, TOPK)
    q, s = fusedmoe.quantize_fp8_per_token_group(_x((M, K)), 128)
    s2 = (s * 2.0).astype(np.float32)
    a = to_float(layer(q, ids, tw, hidden_states_scale=s, out_dtype="fp32"))
    b = to_float(layer(q, ids, tw, hidden_states_scale=s2, out_dtype="fp32"))
    assert np.abs(b).max() > 0 and not np.array_equal(a, b)
    # dequantised input x = e4m3(q) * s re-quantises to the same codes with the same scales
    xq = fusedmoe.decode(q, "e4m3").astype(np.float32) * np.repeat(s2, 128, axis=1)[:, :K]
    np.testing.assert_array_equal(b, to_float(layer(xq, ids, tw)))


def test_prequantized_ml_dtypes_codes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    cfg, w, _ = make_layer("fp8-block", E, K, N)
    layer = fusedmoe.MoELayer(cfg, w)
    ids, tw = routing(M, E, TOPK)
    xb = bf16(_x((M, K)))
    q, s = fusedmoe.quantize_fp8_per_token_group(xb)
    out = layer(q.view(ml_dtypes.float8_e4m3fn), ids, tw, hidden_states_scale=s, out_dtype=ml_dtypes.bfloat16)
    assert out.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(_bits(out), _bits(layer(xb, ids, tw)))


def test_prequantized_bad_arguments_name_the_argument():
    cfg, w, _ = make_layer("fp8-block", E, K, N)
    layer = fusedmoe.MoELayer(cfg, w)
    ids, tw = routing(M, E, TOPK)
    x = _x((M, K))
    q, s = fusedmoe.quantize_fp8_per_token_group(x)
    fp8 = fusedmoe.as_dtype(q, "fp8")

    def arg_of(fn):
        with pytest.raises(fusedmoe.InvalidArgument) as ei:
            fn()
        assert ei.value.argument in str(ei.value)
        return ei.value.argument

    assert arg_of(lambda: layer(fp8, ids, tw, out_dtype="bf16")) == "hidden_states_scale"  # codes without scales
    assert arg_of(lambda: layer(fp8, ids, tw, hidden_states_scale=s)) == "out_dtype"  # no output dtype
    assert arg_of(lambda: layer(fp8, ids, tw, hidden_states_scale=s, out_dtype="int32")) == "out_dtype"
    assert arg_of(lambda: layer(fp8, ids, tw, hidden_states_scale=s, out_dtype="nonsense")) == "out_dtype"
    assert arg_of(lambda: layer(x, ids, tw, hidden_states_scale=s)) == "hidden_states_scale"  # scales, float input
    assert arg_of(lambda: layer(x, ids, tw, out_dtype="bf16")) == "out_dtype"  # float input, other dtype
    assert arg_of(lambda: layer(fp8, ids, tw, hidden_states_scale=s[:, :1], out_dtype="bf16")) == "hidden_states_scale"
    assert arg_of(lambda: layer(fp8, ids, tw, hidden_states_scale=s.astype(np.float16),
                                out_dtype="bf16")) == "hidden_states_scale"
    s_strided = np.zeros((M, 4), np.float32)[:, ::2]
    assert arg_of(lambda: layer(fp8, ids, tw, hidden_states_scale=s_strided, out_dtype="bf16")) == "hidden_states_scale"
    assert arg_of(lambda: layer(fp8, ids, tw, hidden_states_scale=s, out_dtype="bf16",
                                apply_router_weight_on_input=True)) == "apply_router_weight_on_input"
    assert arg_of(lambda: layer(fp8, ids, tw, hidden_states_scale=s,
                                output=np.zeros((M, K), np.int32))) == "output"
    assert arg_of(lambda: layer(fp8, ids, tw, hidden_states_scale=s, output=np.zeros((M, K), np.float32),
                                out_dtype="bf16")) == "out_dtype"  # both, disagreeing
    # F8_E4M3 inputs are fp8-block's only
    cfg16, w16, _ = make_layer("fp16", E, K, N)
    assert arg_of(lambda: fusedmoe.MoELayer(cfg16, w16)(fp8, ids, tw, hidden_states_scale=s,
                                                         out_dtype="fp16")) == "hidden_states"


# ---- the batched / masked layout ----------------------------------------------------------------

def _masked_input(fmt, counts, t=T, k=K, seed=5, act="bf16"):
    """[E, T, K] activations with NaN in the rows past each count (never read)."""
    x = _x((E, t, k), seed)
    for e, c in enumerate(counts):
        x[e, max(0, min(c, t)):] = np.nan
    return _act_input(x, act if fmt not in ("fp16", "fp32") else fmt), x


def _contiguous_reference(layer, x, counts, t, act_bits=None):
    """The contiguous layer over all valid rows, each routed top-1 to its expert with weight 1."""
    rows, ids, where = [], [], []
    xa = x.array if isinstance(x, fusedmoe.Typed) else x
    for e, c in enumerate(counts):
        c = max(0, min(int(c), t))
        rows.append(xa[e, :c])
        ids += [e] * c
        where += [(e, j) for j in range(c)]
    xs = np.concatenate(rows)
    if isinstance(x, fusedmoe.Typed):
        xs = fusedmoe.as_dtype(np.ascontiguousarray(xs), x.dtype)
    ids = np.array(ids, np.int32).reshape(-1, 1)
    out = layer(xs, ids, np.ones_like(ids, dtype=np.float32))
    return _bits(out), where


MASKED_FORMATS = [("bf16", "bf16"), ("fp16", "bf16"), ("fp32", "bf16"), ("fp8-tensor", "bf16"),
                  ("fp8-channel", "bf16"), ("fp8-block", "bf16"), ("w4a8-int4", "bf16"), ("mxfp4", "bf16"),
                  ("mxfp4", "fp8"), ("nvfp4", "bf16"), ("nvfp4", "nvfp4")]


@pytest.mark.parametrize("fmt,act_dtype", MASKED_FORMATS)
def test_masked_equals_contiguous_top1_bitwise(fmt, act_dtype):
    cfg, w, _ = make_layer(fmt, E, K, N, bias=True, act_dtype=act_dtype)
    layer = fusedmoe.MoELayer(cfg, w)
    counts = np.array([3, 0, T, 1], np.int32)
    x, _ = _masked_input(fmt, counts)
    out = layer.run_masked(x, counts)
    ob = _bits(out)
    assert ob.shape == (E, T, K)
    ref, where = _contiguous_reference(layer, x, counts, T)
    for i, (e, j) in enumerate(where):
        np.testing.assert_array_equal(ob[e, j], ref[i], err_msg="%s expert %d row %d" % (fmt, e, j))
    for e, c in enumerate(counts):
        assert not ob[e, c:].any(), "rows past the count of expert %d are not zero" % e


def test_masked_per_expert_equals_contiguous_layer_and_clamps_counts():
    """Per expert (a format with no cross-row scale): expert e's valid rows alone through the
    contiguous layer, top-1 with weight 1; counts past T are clamped, negative ones select nothing;
    int64 counts are converted; a caller's output is overwritten everywhere (zeros past the count)."""
    cfg, w, _ = make_layer("fp8-block", E, K, N, bias=True)
    layer = fusedmoe.MoELayer(cfg, w)
    counts = np.array([T + 7, -3, 2, 4], np.int64)
    x, _ = _masked_input("fp8-block", counts)
    out = fusedmoe.as_dtype(np.full((E, T, K), 0x7FC0, np.uint16), "bf16")  # NaN everywhere
    res = layer.run_masked(x, counts, output=out)
    assert res is out
    ob = _bits(out)
    for e, c in enumerate(counts):
        c = max(0, min(int(c), T))
        if c:
            xe = fusedmoe.as_dtype(np.ascontiguousarray(x.array[e, :c]), "bf16")
            ids = np.full((c, 1), e, np.int32)
            np.testing.assert_array_equal(ob[e, :c], _bits(layer(xe, ids, np.ones((c, 1), np.float32))))
        assert not ob[e, c:].any()


@pytest.mark.parametrize("act_dtype", ["bf16", "fp32"])
def test_masked_prequantized_equals_masked_bitwise(act_dtype):
    cfg, w, _ = make_layer("fp8-block", E, K_RAGGED, N)
    layer = fusedmoe.MoELayer(cfg, w)
    counts = np.array([1, T, 0, 3], np.int32)
    x, _ = _masked_input("fp8-block", counts, k=K_RAGGED, act=act_dtype)
    ref = layer.run_masked(x, counts)
    xv = x.array if isinstance(x, fusedmoe.Typed) else x
    q, s = fusedmoe.quantize_fp8_per_token_group(fusedmoe.as_dtype(xv, act_dtype) if act_dtype == "bf16" else xv)
    assert s.shape == (E, T, 2)
    out = layer.run_masked(q, counts, hidden_states_scale=s, out_dtype=act_dtype)
    np.testing.assert_array_equal(_bits(out), _bits(ref))
    assert layer.can_implement_masked(T, prequantized=True) == fusedmoe.Support(True, "")


def test_masked_workspace_and_can_implement_on_the_cpu():
    cfg, w, _ = make_layer("bf16", E, K, N)
    layer = fusedmoe.MoELayer(cfg, w)
    assert layer.masked_workspace_size(64) == 0
    assert layer.can_implement_masked(64) == fusedmoe.Support(True, "")
    with pytest.raises(fusedmoe.InvalidArgument) as ei:
        layer.masked_workspace_size(-1)
    assert ei.value.argument == "max_tokens_per_expert"


def test_masked_bad_arguments_name_the_argument():
    cfg, w, _ = make_layer("fp8-block", E, K, N)
    layer = fusedmoe.MoELayer(cfg, w)
    counts = np.array([1, 2, 3, 4], np.int32)
    x = _x((E, T, K))
    q, s = fusedmoe.quantize_fp8_per_token_group(x)

    def arg_of(fn):
        with pytest.raises(fusedmoe.InvalidArgument) as ei:
            fn()
        assert "'%s'" % ei.value.argument in str(ei.value)
        return ei.value.argument

    assert arg_of(lambda: layer.run_masked(x[1:], counts)) == "hidden_states"  # E != the layer's
    assert arg_of(lambda: layer.run_masked(x[:, :, :128], counts)) == "hidden_states"  # K
    assert arg_of(lambda: layer.run_masked(x[0], counts)) == "hidden_states"  # 2-D
    assert arg_of(lambda: layer.run_masked(x, counts, output=np.zeros((E, T, K), np.float32)[:, ::-1])) == "output"
    assert arg_of(lambda: layer.run_masked(x, counts, output=np.zeros((E, T + 1, K), np.float32))) == "output"
    assert arg_of(lambda: layer.run_masked(x, counts[:3])) == "expert_num_tokens"
    assert arg_of(lambda: layer.run_masked(x, counts.astype(np.float32))) == "expert_num_tokens"
    assert arg_of(lambda: layer.run_masked(x, "4")) == "expert_num_tokens"
    assert arg_of(lambda: layer.run_masked(x, counts, hidden_states_scale=s)) == "hidden_states_scale"
    assert arg_of(lambda: layer.run_masked(fusedmoe.as_dtype(q, "fp8"), counts, out_dtype="bf16")) \
        == "hidden_states_scale"
    assert arg_of(lambda: layer.run_masked(q, counts, out_dtype="bf16")) == "hidden_states"  # uint8, no scales
    assert arg_of(lambda: layer.run_masked(q, counts, hidden_states_scale=s)) == "out_dtype"
    assert arg_of(lambda: layer.run_masked(q, counts, hidden_states_scale=s[:, :2], out_dtype="bf16")) \
        == "hidden_states_scale"
    assert arg_of(lambda: layer.run_masked(x, counts, stream="default")) == "stream"
    assert arg_of(lambda: layer.run_masked(x, counts, output=x)) == "output"  # in place is refused


# ---- warmup -------------------------------------------------------------------------------------

def test_warmup_calls_the_library():
    cfg, w, _ = make_layer("fp8-block", E, K, N)
    layer = fusedmoe.MoELayer(cfg, w)
    assert layer.warmup(64, 2) is None and layer.warmup(0, 1) is None  # CPU: nothing to prepare
    layer.warmup(8, 2, stream=0)
    for args, name in (((-1, 2), "max_tokens"), ((4, 0), "topk")):
        with pytest.raises(fusedmoe.InvalidArgument) as ei:
            layer.warmup(*args)
        assert ei.value.argument == name
    with pytest.raises(fusedmoe.InvalidArgument) as ei:
        layer.warmup(4, 2, stream="s")
    assert ei.value.argument == "stream"


# ---- the drop-ins -------------------------------------------------------------------------------

def test_deep_gemm_moe_fp8_prequantized_inputs():
    cfg, w, _ = make_layer("fp8-block", E, K, N)
    ids, tw = routing(M, E, TOPK)
    xb = bf16(_x((M, K)))
    args = (w["w13_weight"], w["w2_weight"], w["w13_weight_scale"], w["w2_weight_scale"], tw, ids)
    ref = seeds.deep_gemm_moe_fp8(xb, *args)
    np.testing.assert_array_equal(_bits(ref), _bits(fusedmoe.MoELayer(cfg, w)(xb, ids, tw)))
    q, s = fusedmoe.quantize_fp8_per_token_group(xb)
    out = seeds.deep_gemm_moe_fp8(fusedmoe.as_dtype(q, "fp8"), *args, hidden_states_scale=s)
    np.testing.assert_array_equal(_bits(out), _bits(ref))
    out = seeds.deep_gemm_moe_fp8(q, *args, a1_scale=s)  # the group scales as a1_scale, raw uint8 codes
    np.testing.assert_array_equal(_bits(out), _bits(ref))
    # DeepGEMM's column-major scales viewed as [M, K/128]: copied contiguous
    s_cm = np.asfortranarray(s)
    assert not s_cm.flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(_bits(seeds.deep_gemm_moe_fp8(q, *args, hidden_states_scale=s_cm)), _bits(ref))
    out32 = seeds.deep_gemm_moe_fp8(q, *args, hidden_states_scale=s, out_dtype="fp32")
    assert out32.dtype == np.float32
    with pytest.raises(fusedmoe.InvalidArgument, match="'inplace'"):
        seeds.deep_gemm_moe_fp8(q, *args, inplace=True, hidden_states_scale=s)
    with pytest.raises(fusedmoe.InvalidArgument, match="'hidden_states_scale'"):
        seeds.deep_gemm_moe_fp8(fusedmoe.as_dtype(q, "fp8"), *args)
    with pytest.raises(fusedmoe.InvalidArgument, match="'hidden_states_scale'"):
        seeds.deep_gemm_moe_fp8(xb, *args, hidden_states_scale=s)
    with pytest.raises(fusedmoe.InvalidArgument, match="'a1_scale'"):
        seeds.deep_gemm_moe_fp8(q, *args, hidden_states_scale=s, a1_scale=s)
    with pytest.raises(NotImplementedError, match="static activation scales"):
        seeds.deep_gemm_moe_fp8(xb, *args, a1_scale=np.ones(1, np.float32))


def test_vllm_experts_take_deepgemm_quantised_inputs():
    cfg, w, _ = make_layer("fp8-block", E, K, N)
    ids, tw = routing(M, E, TOPK)
    xb = bf16(_x((M, K)))
    q, s = fusedmoe.quantize_fp8_per_token_group(xb)
    qc = seeds.FusedMoEQuantConfig(quant_dtype="float8_e4m3fn", block_shape=[128, 128], w1_scale=w["w13_weight_scale"],
                                   w2_scale=w["w2_weight_scale"])
    ex = FusedMoEExperts(None, qc)
    ref = fusedmoe.MoELayer(cfg, w)(xb, ids, tw)
    out = fusedmoe.as_dtype(np.zeros((M, K), np.uint16), "bf16")
    ex.apply(out, fusedmoe.as_dtype(q, "fp8"), w["w13_weight"], w["w2_weight"], tw, ids, "silu", E, None, s, None,
             None, None, None, False)
    np.testing.assert_array_equal(_bits(out), _bits(ref))
    with pytest.raises(fusedmoe.InvalidArgument, match="'a1q_scale'"):
        ex.apply(out, fusedmoe.as_dtype(q, "fp8"), w["w13_weight"], w["w2_weight"], tw, ids, "silu", E, None, None,
                 None, None, None, None, False)
    with pytest.raises(fusedmoe.InvalidArgument, match="'a1q_scale'"):  # per-token scales are not group scales
        ex.apply(out, fusedmoe.as_dtype(q, "fp8"), w["w13_weight"], w["w2_weight"], tw, ids, "silu", E, None,
                 s[:, :1].copy(), None, None, None, None, False)
    # quantised inputs of another format are refused by name
    cfgc, wc, _ = make_layer("fp8-channel", E, K, N)
    exc = FusedMoEExperts(None, seeds.FusedMoEQuantConfig(quant_dtype="float8_e4m3fn", per_act_token_quant=True,
                                                          w1_scale=wc["w13_weight_scale"],
                                                          w2_scale=wc["w2_weight_scale"]))
    with pytest.raises(fusedmoe.InvalidArgument, match="'hidden_states'"):
        exc.apply(out, fusedmoe.as_dtype(q, "fp8"), fusedmoe.as_dtype(wc["w13_weight"], "fp8"),
                  fusedmoe.as_dtype(wc["w2_weight"], "fp8"), tw, ids, "silu", E, None, s, None, None, None, None, False)


def test_vllm_experts_workspace_shapes_old_signature():
    a = types.SimpleNamespace(dtype="bf16", shape=(M, K))
    assert FusedMoEExperts().workspace_shapes(a, a, M, N, K, TOPK, E, E, None) == ((M, K), (0,), (M, K), "bf16")


def test_vllm_batched_experts_class():
    ex = FusedMoEBatchedExperts(E, 2)
    assert ex.workspace_shapes(T, 2 * N, K, TOPK, E, E, None, "silu") == \
        ((E, 2 * T, max(2 * N, K)), (E, 2 * T, max(N, K)), (E, T, K))
    a = types.SimpleNamespace(dtype="bf16", shape=(E, T, K))
    assert ex.workspace_shapes(a, a, 99, 2 * N, K, TOPK, E, E, None)[2:] == ((E, T, K), "bf16")
    assert not ex.supports_expert_map() and not ex.supports_chunking()
    fmt = ex.activation_formats[0]
    assert fmt == FusedMoEBatchedExperts.activation_format() and fmt != FusedMoEExperts.activation_format()

    cfg, w, _ = make_layer("fp8-block", E, K, N)
    qc = seeds.FusedMoEQuantConfig(quant_dtype="float8_e4m3fn", block_shape=[128, 128], w1_scale=w["w13_weight_scale"],
                                   w2_scale=w["w2_weight_scale"])
    ex = FusedMoEBatchedExperts(E, 1, None, qc)
    counts = np.array([2, 0, T, 1], np.int32)
    meta = types.SimpleNamespace(expert_num_tokens=counts)
    x, _ = _masked_input("fp8-block", counts)
    ref = fusedmoe.MoELayer(cfg, w).run_masked(x, counts)
    out = fusedmoe.as_dtype(np.zeros((E, T, K), np.uint16), "bf16")
    ids, tw = routing(M, E, TOPK)  # not read by the batched layout
    ex.apply(out, x, w["w13_weight"], w["w2_weight"], tw, ids, "silu", E, None, None, None, None, None, meta, False)
    np.testing.assert_array_equal(_bits(out), _bits(ref))
    # pre-quantised (BatchedDeepGemmExperts' inputs): [E, T, K] codes + [E, T, K/128] scales
    q, s = fusedmoe.quantize_fp8_per_token_group(x)
    out2 = fusedmoe.as_dtype(np.zeros((E, T, K), np.uint16), "bf16")
    ex.apply(out2, fusedmoe.as_dtype(q, "fp8"), w["w13_weight"], w["w2_weight"], tw, ids, "silu", E, None,
             a1q_scale=s, a2_scale=None, workspace13=None, workspace2=None, expert_tokens_meta=meta,
             apply_router_weight_on_input=False)
    np.testing.assert_array_equal(_bits(out2), _bits(ref))
    with pytest.raises(fusedmoe.InvalidArgument, match="'expert_tokens_meta'"):
        ex.apply(out, x, w["w13_weight"], w["w2_weight"], tw, ids, "silu", E, None, None, None, None, None, None, False)
    with pytest.raises(fusedmoe.InvalidArgument, match="'expert_map'"):
        ex.apply(out, x, w["w13_weight"], w["w2_weight"], tw, ids, "silu", E, np.arange(E, dtype=np.int32), None, None,
                 None, None, meta, False)
    with pytest.raises(fusedmoe.InvalidArgument, match="'hidden_states'"):
        ex.apply(out, x.array[0], w["w13_weight"], w["w2_weight"], tw, ids, "silu", E, None, None, None, None, None,
                 meta, False)
    with pytest.raises(fusedmoe.InvalidArgument, match="'max_experts_per_worker'"):
        FusedMoEBatchedExperts(0, 1)
    with pytest.raises(TypeError):
        FusedMoEBatchedExperts(E, 1, bogus=1)


# ---- PyTorch CPU tensors (when installed) -------------------------------------------------------

def test_torch_cpu_prequantized_and_masked():
    torch = pytest.importorskip("torch")
    import fusedmoe.torch_ops as torch_ops  # noqa: PLC0415

    cfg, w, _ = make_layer("fp8-block", E, K, N, bias=True)
    tw_ = {k: torch.from_numpy(v) for k, v in w.items()}
    tw_["w13_weight"] = tw_["w13_weight"].view(torch.float8_e4m3fn)
    tw_["w2_weight"] = tw_["w2_weight"].view(torch.float8_e4m3fn)
    layer = fusedmoe.MoELayer(cfg, tw_)
    x = torch.randn(M, K, generator=torch.Generator().manual_seed(0)).bfloat16()
    ids = torch.stack([torch.randperm(E)[:TOPK] for _ in range(M)]).int()
    tw = torch.rand(M, TOPK)
    ref = layer(x, ids, tw)
    q, s = fusedmoe.quantize_fp8_per_token_group(x)
    assert q.dtype == torch.float8_e4m3fn and s.dtype == torch.float32
    out = layer(q, ids, tw, hidden_states_scale=s, out_dtype=torch.bfloat16)
    assert out.dtype == torch.bfloat16 and torch.equal(out, ref)

    counts = torch.tensor([2, 0, T, 9], dtype=torch.int32)
    xm = torch.randn(E, T, K, generator=torch.Generator().manual_seed(1)).bfloat16()
    om = layer.run_masked(xm, counts)
    assert om.shape == (E, T, K) and om.dtype == torch.bfloat16
    qm, sm = fusedmoe.quantize_fp8_per_token_group(xm)
    assert torch.equal(layer.run_masked(qm, counts.long(), hidden_states_scale=sm, out_dtype=torch.bfloat16), om)
    assert not om[0, 2:].any() and not om[1].any()
    if torch_ops.available:
        weights = {k: v for k, v in tw_.items() if k not in ("w13_weight", "w2_weight")}
        opm = torch_ops.fused_moe_masked(xm, counts, tw_["w13_weight"], tw_["w2_weight"], cfg, **weights)
        assert torch.equal(opm, om)
        opq = torch_ops.fused_moe_masked(qm, counts, tw_["w13_weight"], tw_["w2_weight"], cfg,
                                         hidden_states_scale=sm, out_dtype=torch.bfloat16, **weights)
        assert torch.equal(opq, om)
        with pytest.raises(fusedmoe.InvalidArgument, match="'out_dtype'"):
            torch_ops.fused_moe_masked(qm, counts, tw_["w13_weight"], tw_["w2_weight"], cfg, hidden_states_scale=sm,
                                       **weights)
        # the fake implementation (torch.compile's view of the op)
        from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: PLC0415

        with FakeTensorMode(allow_non_fake_inputs=True):
            fake = torch.ops.fusedmoe.fused_moe_masked(qm, counts, tw_["w13_weight"], tw_["w2_weight"],
                                                       *[weights.get(n) for n in (
                                                           "w13_weight_scale", "w2_weight_scale",
                                                           "w13_weight_scale_2", "w2_weight_scale_2",
                                                           "w13_input_scale", "w2_input_scale", "w13_bias",
                                                           "w2_bias")], sm, torch_ops.config_string(cfg), "fp32")
            assert fake.shape == (E, T, K) and fake.dtype == torch.float32
