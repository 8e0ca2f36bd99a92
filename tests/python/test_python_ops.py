"""Routing, quantisers, the 128x4 swizzle and the codecs from Python (CPU, NumPy)."""

import numpy as np
import pytest

import fusedmoe


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("renormalize", [True, False])
def test_route_softmax_matches_numpy(renormalize):
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((9, 16)).astype(np.float32)
    w, ids = fusedmoe.route(logits, 4, renormalize=renormalize)
    assert ids.dtype == np.int32 and w.dtype == np.float32 and ids.shape == (9, 4)
    p = _softmax(logits.astype(np.float64))
    ref_ids = np.argsort(-p, axis=1, kind="stable")[:, :4]
    np.testing.assert_array_equal(ids, ref_ids)
    ref_w = np.take_along_axis(p, ref_ids, axis=1)
    if renormalize:
        ref_w /= ref_w.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(w, ref_w, rtol=1e-5)


def test_route_grouped_sigmoid_with_bias_and_scaling():
    rng = np.random.default_rng(1)
    m, e, groups, kept, topk = 5, 32, 8, 3, 6
    logits = rng.standard_normal((m, e)).astype(np.float32)
    bias = (rng.standard_normal(e) * 0.1).astype(np.float32)
    w, ids = fusedmoe.route(logits, topk, score="sigmoid", num_groups=groups, topk_groups=kept,
                            correction_bias=bias, routed_scaling_factor=2.5)
    s = 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
    key = s + bias
    for t in range(m):
        g = key[t].reshape(groups, -1)
        gscore = np.sort(g, axis=1)[:, -2:].sum(axis=1)
        keep = np.argsort(-gscore, kind="stable")[:kept]
        masked = np.full(e, -np.inf)
        for gi in keep:
            masked[gi * (e // groups):(gi + 1) * (e // groups)] = key[t, gi * (e // groups):(gi + 1) * (e // groups)]
        ref = np.argsort(-masked, kind="stable")[:topk]
        np.testing.assert_array_equal(ids[t], ref)
        ref_w = s[t, ref] / s[t, ref].sum() * 2.5
        np.testing.assert_allclose(w[t], ref_w, rtol=1e-5)


def test_route_writes_given_outputs_and_converts_low_precision_logits():
    logits = np.random.default_rng(2).standard_normal((4, 8)).astype(np.float16)
    ids = np.zeros((4, 2), np.int32)
    w = np.zeros((4, 2), np.float32)
    rw, rids = fusedmoe.route(logits, 2, topk_ids=ids, topk_weights=w)
    assert rids is ids and rw is w and (ids >= 0).all()
    with pytest.raises(fusedmoe.InvalidArgument, match="'score'"):
        fusedmoe.route(logits, 2, score="tanh")
    with pytest.raises(fusedmoe.InvalidArgument):
        fusedmoe.route(logits, 9)  # topk > E


def test_fp8_quantisers():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 256)).astype(np.float32) * 3
    q, s = fusedmoe.quantize_fp8_per_tensor(x)
    assert q.dtype == np.uint8 and s == pytest.approx(np.abs(x).max() / 448, rel=1e-6)
    np.testing.assert_allclose(fusedmoe.decode(q, "e4m3") * s, x, rtol=0.07, atol=s * 0.01)
    q2, s2 = fusedmoe.quantize_fp8_per_tensor(x, scale=0.5)
    assert s2 == 0.5
    qr, sr = fusedmoe.quantize_fp8_per_token(x)
    np.testing.assert_allclose(sr, np.abs(x).max(axis=1) / 448, rtol=1e-6)
    qg, sg = fusedmoe.quantize_fp8_per_token_group(x, 128)
    assert sg.shape == (6, 2)
    np.testing.assert_allclose(sg, np.abs(x.reshape(6, 2, 128)).max(axis=2) / 448, rtol=1e-6)
    deq = fusedmoe.decode(qg, "e4m3").reshape(6, 2, 128) * sg[..., None]
    np.testing.assert_allclose(deq.reshape(6, 256), x, rtol=0.07, atol=1e-3)
    _, su = fusedmoe.quantize_fp8_per_token_group(x, 128, ue8m0=True)
    assert np.all(np.log2(su) == np.round(np.log2(su))) and np.all(su >= sg)


def test_nvfp4_mxfp4_int4_and_block_weight_quantisers():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    q, sf, gs = fusedmoe.quantize_nvfp4(x)
    assert q.shape == (8, 32) and sf.shape == (8, 4) and gs == pytest.approx(448 * 6 / np.abs(x).max(), rel=1e-6)
    deq = fusedmoe.decode(q, "e2m1").reshape(8, 4, 16) * fusedmoe.decode(sf, "e4m3")[..., None] / gs
    # Per block the largest step between e2m1 values (4 -> 6) is 2 * sf / gs ~ amax_block / 3.
    np.testing.assert_allclose(deq.reshape(8, 64), x, atol=np.abs(x).max() / 6 * 1.05)
    qm, sm = fusedmoe.quantize_mxfp4(x)
    deq = fusedmoe.decode(qm, "e2m1").reshape(8, 2, 32) * fusedmoe.decode(sm, "e8m0")[..., None]
    np.testing.assert_allclose(deq.reshape(8, 64), x, atol=np.abs(x).max() / 3)
    w = rng.standard_normal((2, 130, 260)).astype(np.float32)
    qb, sb = fusedmoe.quantize_fp8_block_weight(w)
    assert qb.shape == w.shape and sb.shape == (2, 2, 3)
    np.testing.assert_allclose(sb[0, 0, 0], np.abs(w[0, :128, :128]).max() / 448, rtol=1e-6)
    wi = rng.standard_normal((4, 256)).astype(np.float32)
    qi, si = fusedmoe.quantize_int4_group(wi, 128)
    assert qi.shape == (4, 128) and si.shape == (4, 2) and si.dtype == np.uint16
    c, g = fusedmoe.w4a8_split_scales(si)
    assert c.shape == (4,) and g.shape == (4, 2)
    s = fusedmoe.decode(si, "bf16")
    np.testing.assert_allclose(c, 8 * s.max(axis=1) / 448, rtol=1e-6)


def test_quantisers_refuse_cuda_arrays():
    class FakeCuda:  # __dlpack_device__ says CUDA; the quantisers must not touch it
        shape = (2, 16)

        def __dlpack_device__(self):
            return (2, 0)

    with pytest.raises(fusedmoe.Unsupported, match="runs on the CPU only"):
        fusedmoe.quantize_fp8_per_token(FakeCuda())


def _swizzle_formula(flat):
    rows, cols = flat.shape
    pr, pc = -(-rows // 128) * 128, -(-cols // 4) * 4
    out = np.zeros(pr * pc, np.uint8)
    kt = pc // 4
    for m in range(rows):
        for k in range(cols):
            off = (m // 128) * (kt * 512) + (k // 4) * 512 + (m % 32) * 16 + ((m % 128) // 32) * 4 + (k % 4)
            out[off] = flat[m, k]
    return out.reshape(pr, pc)


@pytest.mark.parametrize("rows,cols", [(128, 4), (200, 10), (5, 3), (256, 8)])
def test_swizzle_matches_the_documented_formula_and_round_trips(rows, cols):
    flat = np.random.default_rng(rows).integers(0, 255, (rows, cols)).astype(np.uint8)
    sw = fusedmoe.swizzle_scales_128x4(flat)
    assert sw.shape == fusedmoe.swizzled_shape(rows, cols)
    np.testing.assert_array_equal(sw, _swizzle_formula(flat))
    np.testing.assert_array_equal(fusedmoe.unswizzle_scales_128x4(sw, rows, cols), flat)
    batch = np.stack([flat, flat[::-1].copy()])
    swb = fusedmoe.swizzle_scales_128x4(batch)
    np.testing.assert_array_equal(swb[1], _swizzle_formula(flat[::-1].copy()))
    np.testing.assert_array_equal(fusedmoe.unswizzle_scales_128x4(swb, rows, cols), batch)


def test_codecs_round_trip():
    x = np.array([0.0, 1.0, -2.5, 3.1415926, 1e-3, 448.0, 500.0], np.float32)
    np.testing.assert_array_equal(fusedmoe.decode(fusedmoe.encode(x, "bf16"), "bf16"),
                                  np.array([0, 1, -2.5, 3.140625, 0.00099945068359375, 448, 500], np.float32))
    np.testing.assert_array_equal(fusedmoe.decode(fusedmoe.encode(x, "e4m3"), "e4m3"),
                                  np.array([0, 1, -2.5, 3.25, 2.0 ** -9, 448, 448], np.float32))  # 1e-3 -> 2^-9
    e2 = fusedmoe.decode(fusedmoe.encode(np.array([0.25, 0.75, 1.25, 2.5, 5.0, 7.0], np.float32), "e2m1"), "e2m1")
    np.testing.assert_array_equal(e2, np.array([0.0, 1.0, 1.0, 2.0, 4.0, 6.0], np.float32))  # round half to even
    np.testing.assert_array_equal(fusedmoe.decode(np.array([127, 128, 0], np.uint8), "e8m0"),
                                  np.array([1.0, 2.0, 2.0 ** -127], np.float32))
    with pytest.raises(fusedmoe.InvalidArgument, match="'format'"):
        fusedmoe.encode(x, "fp6")
