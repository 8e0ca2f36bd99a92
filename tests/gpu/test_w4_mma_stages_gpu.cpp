// The 4-bit mma kernel's 3-stage instances (w4_gemm.cu: grids of at most 16 warps per SM with k >= 4096 stream three
// weight stages per warp instead of two) against the 2-stage ones: the same instructions on the same data in the same
// order, so the same bits - for the plain GEMM (MXFP4 - its tail instance at k % 256 = 128 included -, NVFP4 with and
// without its k split in two, W4A8 int4 and uint4b8), the GEMM1 + activation (kAct) instances, linear and swizzled
// scales, k with full and partial last stages, empty experts and 1..8 rows per expert. Both runs are forced
// (w4_mma_force_stages); the outputs start from different poison bytes, so an element either run skips fails.
// Likewise the 2-stage tiles with their activations in shared memory (kSx, w4_mma_force_smem_x) against the register
// form, both on two stages: the 8-token tiles of each format (plain, kFullK-size k and fused-activation cases, a warp
// past n, two passes of one expert), W4A8's and the e2m1 formats' 16- and 32-token tiles. Each run also asserts
// that it reached the form it forced (w4_mma_last_launch).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/moe_kernels.hpp"
#include "cuda/w4_gemm.hpp"
#include "fusedmoe/codecs.hpp"
#include "gpu/gpu_test_util.hpp"
#include "gpu/w4_act_inputs.hpp"

namespace fusedmoe::gputest {
namespace {

// What a case compares: stage counts (2 against 3), or the activations in registers against shared memory (both on
// two stages).
enum class Knob { STAGES, SMEM_X };
// Forces the reference (ref = true) or the tested setting of the knob; restores the rules when a scope ends (also on
// failure).
struct Forced {
  Knob knob;
  Forced(Knob k, bool ref) : knob(k) {
    if (k == Knob::STAGES) {
      cuda::w4_mma_force_stages(ref ? 2 : 3);
    } else {
      cuda::w4_mma_force_stages(2);
      cuda::w4_mma_force_smem_x(ref ? 1 : 2);
    }
  }
  ~Forced() {
    cuda::w4_mma_force_stages(0);
    cuda::w4_mma_force_smem_x(0);
  }
};

struct StageCase {
  Format format;
  bool swizzled, uint4b8, split;
  int64_t N, k;      // weights [E, 2N, k]
  int rows_mult = 1;  // SMEM_X: the rows per expert times this (3: 16-token tiles, 6: 32-token tiles)
};

std::string describe(const StageCase& c) {
  const char* f = c.format == Format::MXFP4 ? "mxfp4" : c.format == Format::NVFP4 ? "nvfp4" : "w4a8-int4";
  return std::string(f) + (c.swizzled ? " swizzled" : "") + (c.uint4b8 ? " uint4b8" : "") + (c.split ? " split" : "") +
         " N " + std::to_string(c.N) + " k " + std::to_string(c.k) +
         (c.rows_mult > 1 ? " rows x" + std::to_string(c.rows_mult) : "");
}

// Bytes of two device buffers of n bytes compared; at least half of the reference's 4-byte words nonzero.
void expect_same(const DeviceBuffer& want_d, const DeviceBuffer& got_d, size_t n, const char* what) {
  std::vector<uint8_t> want(n), got(n);
  want_d.download(want.data(), n);
  got_d.download(got.data(), n);
  int bad = 0, nonzero = 0;
  for (size_t i = 0; i + 4 <= n; i += 4) {
    uint32_t a, b;
    std::memcpy(&a, &want[i], 4);
    std::memcpy(&b, &got[i], 4);
    nonzero += a != 0;
    if (a != b && ++bad <= 5) ADD_FAILURE() << what << ": word " << i / 4 << " differs (reference " << a << ", tested " << b << ")";
  }
  EXPECT_EQ(bad, 0) << what;
  EXPECT_GT(nonzero, static_cast<int>(n / 8)) << what << ": the reference is mostly zeros";
}

// That the last launch ran the form the case forced (so a routing change cannot turn a case into a comparison of one
// form with itself): the tested form (ref = false) or the reference; tiles of 8 tokens as the rows per expert ask.
void expect_launch(const StageCase& c, Knob knob, bool ref, const char* what) {
  const cuda::W4MmaLaunch l = cuda::w4_mma_last_launch();
  const int tiles = c.rows_mult >= 6 ? 4 : c.rows_mult >= 3 ? 2 : 1;
  EXPECT_EQ(l.tiles, tiles) << what << ": 8-token tiles per pass";
  if (knob == Knob::STAGES) {
    EXPECT_EQ(l.stages, ref ? 2 : 3) << what << ": weight stages per warp";
  } else {
    EXPECT_EQ(l.stages, 2) << what << ": weight stages per warp";
    EXPECT_EQ(l.smem_x, !ref) << what << ": activations through shared memory";
  }
  // Two 16-row weight tiles per warp: MXFP4 / NVFP4's shared-memory 16- / 32-token tiles with 2N % 32 == 0, unless
  // FUSEDMOE_W4_RT2=0.
  const char* rt2 = std::getenv("FUSEDMOE_W4_RT2");
  const bool two = knob == Knob::SMEM_X && !ref && tiles > 1 && c.format != Format::W4A8_INT4 && (2 * c.N) % 32 == 0 &&
                   !(rt2 != nullptr && std::string(rt2) == "0");
  EXPECT_EQ(l.row_tiles, two ? 2 : 1) << what << ": 16-row weight tiles per warp";
}

void run_case(const StageCase& c, uint64_t seed, Knob knob = Knob::STAGES) {
  SCOPED_TRACE(describe(c) + (knob == Knob::SMEM_X ? " (shared-memory activations)" : ""));
  // SMEM_X: one expert of 13 rows (two 8-token passes; still 8-token tiles: 4 expected rows per expert).
  std::vector<int32_t> rows = knob == Knob::SMEM_X ? std::vector<int32_t>{3, 0, 1, 13, 5, 0, 2, 7}
                                                   : std::vector<int32_t>{3, 0, 1, 8, 5, 0, 2, 7};
  for (auto& r : rows) r *= c.rows_mult;
  const int E = static_cast<int>(rows.size());
  const int64_t N = c.N, R = 2 * N, k = c.k;
  std::mt19937_64 rng(seed);
  const bool i4 = c.format == Format::W4A8_INT4;
  const W4ActInputs in = make_w4_act_inputs(i4 ? Format::MXFP4 : c.format, c.swizzled && !i4, rows, N, k, rng);
  const int32_t total = in.total;
  std::vector<uint8_t> scales = in.scales;
  std::vector<uint16_t> a = in.a;
  if (i4) {  // bf16 group scales [E, R, k / 128]; an fp16 operand of e4m3 code values
    scales.assign(static_cast<size_t>(E * R * (k / 128) * 2), 0);
    for (size_t i = 0; i < scales.size(); i += 2) {
      const uint16_t b = float_to_bf16_bits(1.0f + static_cast<float>(rng() % 16) / 16.0f);
      scales[i] = static_cast<uint8_t>(b & 0xFF);
      scales[i + 1] = static_cast<uint8_t>(b >> 8);
    }
    for (auto& x : a) x = float_to_fp16_bits(e4m3_to_float(static_cast<uint8_t>(rng() % 0x7F)) * (rng() % 2 ? 1.0f : -1.0f));
  }
  DeviceBuffer dw = to_device(in.w), ds = to_device(scales), da = to_device(korder_rows(a, cuda::KOrder::W4_MMA)),
               doff = to_device(in.offsets), drow_e = to_device(in.row_expert), dbias = to_device(in.bias),
               dwe = to_device(in.w_expert);
  cuda::W4Weights wt;
  wt.format = c.format;
  wt.swizzled = c.swizzled && !i4;
  wt.uint4b8 = c.uint4b8;
  wt.w = static_cast<const uint8_t*>(dw.get());
  wt.scale = ds.get();
  wt.n = R;
  wt.k = k;
  const auto* off = static_cast<const int32_t*>(doff.get());
  const int sms = device_sm_count();
  if (c.split) ASSERT_TRUE(cuda::w4_mma_split_pays(wt, E, total, sms)) << "the case does not reach the split it means to";

  // The plain GEMM: fp32 D (and the split's second half).
  const size_t d_bytes = static_cast<size_t>(total) * R * 4;
  DeviceBuffer d2s(d_bytes + 16), d3s(d_bytes + 16), h2s(d_bytes + 16), h3s(d_bytes + 16);
  FMOE_CUDA(cudaMemset(d2s.get(), 0x00, d_bytes + 16));
  FMOE_CUDA(cudaMemset(d3s.get(), 0xFF, d_bytes + 16));
  FMOE_CUDA(cudaMemset(h2s.get(), 0x00, d_bytes + 16));
  FMOE_CUDA(cudaMemset(h3s.get(), 0xFF, d_bytes + 16));
  {
    Forced f(knob, true);
    cuda::w4_mma_grouped_gemm(wt, da.get(), static_cast<float*>(d2s.get()), E, off, total, nullptr,
                              c.split ? static_cast<float*>(h2s.get()) : nullptr, sms);
    expect_launch(c, knob, true, "GEMM (reference)");
  }
  {
    Forced f(knob, false);
    cuda::w4_mma_grouped_gemm(wt, da.get(), static_cast<float*>(d3s.get()), E, off, total, nullptr,
                              c.split ? static_cast<float*>(h3s.get()) : nullptr, sms);
    expect_launch(c, knob, false, "GEMM (tested)");
  }
  FMOE_CUDA(cudaDeviceSynchronize());
  expect_same(d2s, d3s, d_bytes, "D");
  if (c.split) expect_same(h2s, h3s, d_bytes, "D2 (second k half)");

  // GEMM1 + the gated activation (kAct; e2m1 only, and MXFP4's tail case is refused there).
  if (i4) return;
  cuda::ActivationParams ap;
  ap.R = R;
  ap.N = N;
  ap.row_expert = static_cast<const int32_t*>(drow_e.get());
  ap.act = Activation::SILU;
  ap.bias = static_cast<const float*>(dbias.get());
  ap.dq.kind = c.format == Format::NVFP4 ? cuda::Dequant::GENERIC : cuda::Dequant::NONE;
  if (c.format == Format::NVFP4) ap.dq.w_expert = static_cast<const float*>(dwe.get());
  ap.act_dtype = DType::BF16;
  ap.op = cuda::Operand::BF16;
  ap.quant = cuda::Fp8Quant::NONE;
  ap.korder = cuda::KOrder::W4_MMA;
  if (cuda::w4_mma_act_refusal(wt, ap, E, total) != nullptr) return;
  const size_t o_bytes = static_cast<size_t>(total) * N * 2;
  DeviceBuffer o2(o_bytes + 16), o3(o_bytes + 16);
  FMOE_CUDA(cudaMemset(o2.get(), 0x00, o_bytes + 16));
  FMOE_CUDA(cudaMemset(o3.get(), 0xFF, o_bytes + 16));
  {
    Forced f(knob, true);
    cuda::ActivationParams q = ap;
    q.out = o2.get();
    cuda::w4_mma_gemm1_activation(wt, da.get(), q, E, off, total, nullptr);
    expect_launch(c, knob, true, "GEMM1 + activation (reference)");
  }
  {
    Forced f(knob, false);
    cuda::ActivationParams q = ap;
    q.out = o3.get();
    cuda::w4_mma_gemm1_activation(wt, da.get(), q, E, off, total, nullptr);
    expect_launch(c, knob, false, "GEMM1 + activation (tested)");
  }
  FMOE_CUDA(cudaDeviceSynchronize());
  expect_same(o2, o3, o_bytes, "GEMM1 + activation");
}

TEST(W4MmaStagesGpu, ThreeStagesBitwiseEqualToTwo) {
  FMOE_REQUIRE_GPU();
  uint64_t seed = 61;
  // k = 4352 (k % 256 == 0: the kFullK instances), 4224 (k % 256 = 128: MXFP4's tail instance), 4160 (a last stage of
  // 64 values), 1088 (short k), for each format; NVFP4 once more with its k split in two (few warps: N = 64).
  for (int64_t k : {4352, 4224, 4160, 1088}) {
    run_case({Format::MXFP4, k == 4224, false, false, 72, k}, seed++);
    run_case({Format::NVFP4, k == 4352, false, false, 96, k}, seed++);
    if (k % 128 == 0) run_case({Format::W4A8_INT4, false, k == 4224, false, 64, k}, seed++);
  }
}

TEST(W4MmaStagesGpu, Nvfp4SplitThreeStagesBitwiseEqualToTwo) {
  FMOE_REQUIRE_GPU();
  // The split exists on NVFP4's lean decode only, and not under its own switch (the session-end runs the 4-bit tests
  // with FUSEDMOE_W4_LEAN=0 too).
  const char* split_env = std::getenv("FUSEDMOE_W4_SPLIT");
  if (!cuda::w4_mma_lean(Format::NVFP4) || (split_env != nullptr && std::string(split_env) == "0"))
    GTEST_SKIP() << "the k split is switched off (FUSEDMOE_W4_LEAN / _LEAN_NV / _SPLIT = 0)";
  // A grid small enough that NVFP4 splits k in two (w4_mma_split_pays), both halves through the 3-stage instance.
  run_case({Format::NVFP4, true, false, true, 32, 4352}, 71);
}

TEST(W4MmaStagesGpu, SharedMemoryActivationsBitwiseEqualToRegisters) {
  FMOE_REQUIRE_GPU();
  uint64_t seed = 91;
  // k = 4352 (kFullK's k), a last stage of 1.5 sub-chunks (MXFP4 1216: not its tail instance, which takes k % 256 in
  // 1..128 and has no kSx form), one sub-chunk (W4A8 4224, 1152), 64 values (NVFP4 4160, 1088); N = 72: 144 weight
  // rows (the last block has warps past n) and 72 activation outputs (likewise in the fused GEMM1).
  // The e2m1 kSx tiles exist on the lean decode only (FUSEDMOE_W4_LEAN / _LEAN_NV = 0 switch it off: those cases are
  // left out and the test reports itself skipped after the W4A8 cases).
  const bool mx = cuda::w4_mma_lean(Format::MXFP4), nv = cuda::w4_mma_lean(Format::NVFP4);
  if (mx)
    for (int64_t k : {4352, 2048, 1216}) run_case({Format::MXFP4, k == 2048, false, false, 72, k}, seed++, Knob::SMEM_X);
  if (nv)
    for (int64_t k : {4352, 4160, 1088}) run_case({Format::NVFP4, k == 4352, false, false, 96, k}, seed++, Knob::SMEM_X);
  for (int64_t k : {4352, 4224, 1152}) run_case({Format::W4A8_INT4, false, k == 4224, false, 72, k}, seed++, Knob::SMEM_X);
  // W4A8's 16- and 32-token tiles (~12 / ~23 expected rows per expert; the 13-row expert then takes 3 passes of each).
  for (int mult : {3, 6}) run_case({Format::W4A8_INT4, false, mult == 6, false, 72, 1152, mult}, seed++, Knob::SMEM_X);
  // The e2m1 lean 16- and 32-token tiles (MXFP4 with a full and a partial last stage, NVFP4 swizzled with a 64-value
  // one; the 32-token tile's ring has three buffers).
  for (int mult : {3, 6}) {
    if (mx)
      for (int64_t k : {2048, 1216}) run_case({Format::MXFP4, false, false, false, 72, k, mult}, seed++, Knob::SMEM_X);
    if (nv) run_case({Format::NVFP4, true, false, false, 96, 1088, mult}, seed++, Knob::SMEM_X);
    // 2N = 192 rows (n % 32 == 0, as NVFP4's above): two 16-row weight tiles per warp (w4_gemm.cu kRT) unless
    // FUSEDMOE_W4_RT2=0.
    if (mx) run_case({Format::MXFP4, false, false, false, 96, 1216, mult}, seed++, Knob::SMEM_X);
  }
  if (!mx || !nv) GTEST_SKIP() << "e2m1 cases left out: the lean decode is switched off (FUSEDMOE_W4_LEAN / _LEAN_NV = 0)";
}

}  // namespace
}  // namespace fusedmoe::gputest
