"""PyTorch on the CPU: torch tensors in and out, the torch.library op (fake implementation,
torch.compile), the drop-ins with torch tensors, and the MoE-block example. Skipped without torch."""

import importlib.util
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import fusedmoe  # noqa: E402
import fusedmoe.torch_ops as torch_ops  # noqa: E402
from fusedmoe import seeds  # noqa: E402
from torch_reference import moe_reference, to_torch  # noqa: E402

M, E, K, N, TOPK = 8, 4, 256, 128, 2

needs_op = pytest.mark.skipif(not torch_ops.available, reason="torch.library.custom_op needs torch >= 2.4")


def _layer(fmt, act="silu", bias=False, **kw):
    cfg = fusedmoe.LayerConfig(fmt, activation=act)
    fl = fusedmoe.random_float_layer(cfg, E, K, N, seed=1, with_bias=bias)
    qcfg, w = fusedmoe.quantize_layer(cfg, fl["w13"], fl["w2"], fl.get("w13_bias"), fl.get("w2_bias"), format=fmt, **kw)
    return qcfg, w, fusedmoe.dequantize_layer(qcfg, w)


def _routing(seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(M, E, generator=g)
    w, ids = torch.topk(torch.softmax(logits, -1), TOPK)  # int64 ids, as torch.topk returns them
    return ids, (w / w.sum(-1, keepdim=True)).float()


@pytest.mark.parametrize("fmt", ["bf16", "fp32", "fp8-block", "nvfp4"])
def test_torch_tensors_in_and_out(fmt):
    cfg, w, fw = _layer(fmt)
    tw = to_torch(w, cfg)
    ids, weights = _routing()
    x = torch.randn(M, K, generator=torch.Generator().manual_seed(2))
    x = x if fmt == "fp32" else x.bfloat16()
    out = fusedmoe.MoELayer(cfg, tw)(x, ids, weights)
    assert isinstance(out, torch.Tensor) and out.dtype == x.dtype and out.shape == (M, K)
    ref = moe_reference(x, torch.from_numpy(fw["w13"]), torch.from_numpy(fw["w2"]), ids, weights, cfg)
    tol = 1e-4 if fmt == "fp32" else 0.05
    assert (out.double() - ref).abs().max() <= tol * ref.abs().max()
    # The same bits as through NumPy.
    np_out = fusedmoe.MoELayer(cfg, w)(fusedmoe.as_dtype(x.view(torch.int16).numpy().view(np.uint16), "bf16")
                                       if x.dtype == torch.bfloat16 else x.numpy(), ids.int().numpy(), weights.numpy())
    got = out.view(torch.int16).numpy().view(np.uint16) if out.dtype == torch.bfloat16 else out.numpy()
    want = np_out.array if isinstance(np_out, fusedmoe.Typed) else np_out
    np.testing.assert_array_equal(got, want)


def test_parameters_with_requires_grad_and_float8_weights():
    cfg, w, _ = _layer("fp8-channel")
    tw = {k: torch.nn.Parameter(v, requires_grad=False) if v.dtype == torch.float32 else v
          for k, v in to_torch(w, cfg).items()}
    assert tw["w13_weight"].dtype == torch.float8_e4m3fn
    ids, weights = _routing()
    x = torch.randn(M, K).bfloat16()
    fusedmoe.MoELayer(cfg, tw)(x, ids, weights)
    cfg, w, _ = _layer("bf16")
    tw = {k: torch.nn.Parameter(v.float()).bfloat16() for k, v in to_torch(w, cfg).items()}
    tw = {k: torch.nn.Parameter(v) for k, v in tw.items()}  # requires_grad=True
    out = fusedmoe.MoELayer(cfg, tw)(x, ids, weights)
    assert not out.requires_grad


def test_route_with_torch():
    logits = torch.randn(M, 16)
    w, ids = fusedmoe.route(logits, 4)
    ref_w, ref_ids = torch.topk(torch.softmax(logits, -1), 4)
    assert torch.equal(ids.long(), ref_ids)
    torch.testing.assert_close(w, ref_w / ref_w.sum(-1, keepdim=True))


@needs_op
def test_custom_op_eager_out_variant_and_opcheck():
    cfg, w, _ = _layer("bf16")
    tw = to_torch(w, cfg)
    ids, weights = _routing()
    x = torch.randn(M, K).bfloat16()
    ref = fusedmoe.MoELayer(cfg, tw)(x, ids, weights)
    out = torch_ops.fused_moe(x, tw["w13_weight"], tw["w2_weight"], weights, ids.int(), cfg)
    assert torch.equal(out, ref)
    buf = torch.empty_like(x)
    torch_ops.fused_moe_out(buf, x, tw["w13_weight"], tw["w2_weight"], weights, ids.int(), "bf16")
    assert torch.equal(buf, ref)
    args = (x, ids.int(), weights, tw["w13_weight"], tw["w2_weight"], None, None, None, None, None, None, None, None,
            None, "format=bf16", False)
    torch.library.opcheck(torch.ops.fusedmoe.fused_moe.default, args)


@needs_op
def test_fake_implementation_gives_shapes_without_running():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(M, K, dtype=torch.bfloat16)
        w13 = torch.empty(E, 2 * N, K, dtype=torch.bfloat16)
        w2 = torch.empty(E, K, N, dtype=torch.bfloat16)
        out = torch.ops.fusedmoe.fused_moe(x, torch.empty(M, 2, dtype=torch.int32), torch.empty(M, 2), w13, w2, None,
                                           None, None, None, None, None, None, None, None, "format=bf16", False)
        assert out.shape == (M, K) and out.dtype == torch.bfloat16


@needs_op
def test_torch_compile_fullgraph():
    cfg, w, _ = _layer("fp8-block")
    tw = to_torch(w, cfg)
    ids, weights = _routing()
    x = torch.randn(M, K).bfloat16()

    def f(x, ids, weights):
        return torch_ops.fused_moe(x * 1.0, tw["w13_weight"], tw["w2_weight"], weights, ids.int(), cfg,
                                   w13_weight_scale=tw["w13_weight_scale"], w2_weight_scale=tw["w2_weight_scale"]) + 0

    eager = f(x, ids, weights)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(x, ids, weights)
    assert torch.equal(eager, compiled)


def test_seeds_with_torch_views():
    """FlashInfer passes nvfp4 weights as int64 views and block scales as int32 views."""
    amax = 5.25
    cfg, w, _ = _layer("nvfp4", act_dtype="nvfp4", nvfp4_w13_act_amax=amax, nvfp4_w2_act_amax=amax)
    tw = to_torch(w, cfg)
    ids, weights = _routing()
    x = torch.randn(M, K).bfloat16()
    ref = fusedmoe.MoELayer(cfg, tw)(x, ids, weights)

    def swap(t):
        r = t.shape[1] // 2
        return torch.cat([t[:, r:], t[:, :r]], 1).contiguous()

    sw = lambda t: fusedmoe.swizzle_scales_128x4(t.view(torch.uint8))  # noqa: E731
    in1, in2 = tw["w13_input_scale"], tw["w2_input_scale"]
    qs = [1.0 / in1[:1], sw(swap(tw["w13_weight_scale"])).view(torch.int32), in1 * tw["w13_weight_scale_2"],
          1.0 / in2[:1], sw(tw["w2_weight_scale"]).view(torch.int32), in2 * tw["w2_weight_scale_2"]]
    out = seeds.cutlass_fused_moe(x, ids.int(), weights, swap(tw["w13_weight"]).view(torch.long),
                                  tw["w2_weight"].view(torch.long), torch.bfloat16, qs)
    assert torch.equal(out, ref)


def test_example_switches_a_model_block():
    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torch_moe_block.py")
    spec = importlib.util.spec_from_file_location("torch_moe_block", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["torch_moe_block"] = mod
    spec.loader.exec_module(mod)
    assert mod.main(["--device", "cpu", "--tokens", "16"]) <= 1e-4
    assert mod.main(["--device", "cpu", "--tokens", "16", "--format", "fp8-channel"]) <= 6e-2
