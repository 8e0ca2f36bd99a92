// GEMM1 with the gated activation in the 4-bit mma kernel's epilogue (w4_mma_gemm1_activation, src/cuda/w4_gemm.cu
// kAct: decode sizes) against the unfused stages it replaces: the same kernel writing fp32 h (w4_mma_grouped_gemm),
// then the activation kernel (launch_activation). The epilogue runs the activation kernel's arithmetic on the same
// sums, so GEMM2's bf16 operand must be the same bytes - in the mma kernel's k order (KOrder::W4_MMA) and the
// natural one; MXFP4 and NVFP4 (with its per-expert global scale), linear and swizzled scales, gate / up rows in
// halves and interleaved, both orders, every gated activation, with and without fc1 bias; k taking each of the kernel's
// instances (plain - k % 256 = 128 included for NVFP4 - and kFullK at k % 256 == 0, k >= 4096); empty experts, 1..8 rows per
// expert, N not a multiple of a block's 32 outputs. The two outputs start from different poison bytes, so an output
// either path skips fails. And the refusals: what w4_mma_act_refusal turns away.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
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

struct MmaActCase {
  Format format;
  bool swizzled, interleaved, bias;
  GateUpOrder order;
  Activation act;
  std::vector<int32_t> rows;  // per expert, at most 8 expected (one 8-token pass)
  int64_t N, k;
  cuda::KOrder korder;  // GEMM2's operand order
};

std::string describe(const MmaActCase& c) {
  return std::string(c.format == Format::MXFP4 ? "mxfp4" : "nvfp4") + (c.swizzled ? " swizzled" : " linear") +
         (c.interleaved ? " interleaved" : " halves") + (c.order == GateUpOrder::GATE_UP ? " gate-up" : " up-gate") +
         (c.bias ? " bias" : "") + " act " + std::to_string(static_cast<int>(c.act)) + " N " + std::to_string(c.N) +
         " k " + std::to_string(c.k) + (c.korder == cuda::KOrder::W4_MMA ? " w4-mma order" : " natural order");
}

void run_case(const MmaActCase& c, uint64_t seed) {
  SCOPED_TRACE(describe(c));
  const int E = static_cast<int>(c.rows.size());
  const int64_t N = c.N, R = 2 * N, k = c.k;
  std::mt19937_64 rng(seed);
  const W4ActInputs in = make_w4_act_inputs(c.format, c.swizzled, c.rows, N, k, rng);
  const auto &offsets = in.offsets, &row_expert = in.row_expert;
  const int32_t total = in.total;
  const auto &w = in.w, &scales = in.scales;
  const auto& a = in.a;
  const auto &bias = in.bias, &w_expert = in.w_expert;

  // The lean mma kernel takes GEMM1's operand pre-paired (KOrder::W4_MMA, w4_kperm.cuh).
  DeviceBuffer dw = to_device(w), ds = to_device(scales), da = to_device(korder_rows(a, cuda::KOrder::W4_MMA)),
               doff = to_device(offsets), drow_e = to_device(row_expert), dbias = to_device(bias),
               dwe = to_device(w_expert);
  const std::vector<int32_t> count{total};
  DeviceBuffer dcount = to_device(count);
  const size_t out_bytes = static_cast<size_t>(total) * N * 2 + 16, h_bytes = static_cast<size_t>(total) * R * 4 + 16;
  DeviceBuffer dh(h_bytes), dout_ref(out_bytes), dout(out_bytes);
  FMOE_CUDA(cudaMemset(dout_ref.get(), 0x00, out_bytes));
  FMOE_CUDA(cudaMemset(dout.get(), 0xFF, out_bytes));

  cuda::W4Weights wt;
  wt.format = c.format;
  wt.swizzled = c.swizzled;
  wt.w = static_cast<const uint8_t*>(dw.get());
  wt.scale = ds.get();
  wt.n = R;
  wt.k = k;

  cuda::ActivationParams ap;
  ap.h = static_cast<const float*>(dh.get());
  ap.R = R;
  ap.N = N;
  ap.row_expert = static_cast<const int32_t*>(drow_e.get());
  ap.rows = static_cast<const int32_t*>(dcount.get());
  ap.act = c.act;
  ap.order = c.order;
  ap.interleaved = c.interleaved;
  ap.bias = c.bias ? static_cast<const float*>(dbias.get()) : nullptr;
  ap.dq.kind = c.format == Format::NVFP4 ? cuda::Dequant::GENERIC : cuda::Dequant::NONE;
  if (c.format == Format::NVFP4) ap.dq.w_expert = static_cast<const float*>(dwe.get());
  ap.act_dtype = DType::BF16;
  ap.op = cuda::Operand::BF16;
  ap.quant = cuda::Fp8Quant::NONE;
  ap.korder = c.korder;
  ASSERT_EQ(cuda::w4_mma_act_refusal(wt, ap, E, total), nullptr);

  // Unfused: fp32 h, then the activation kernel.
  const auto* off = static_cast<const int32_t*>(doff.get());
  cuda::w4_mma_grouped_gemm(wt, da.get(), static_cast<float*>(dh.get()), E, off, total, nullptr);
  cuda::ActivationParams ref = ap;
  ref.out = dout_ref.get();
  cuda::launch_activation(ref, total, nullptr);
  // Fused.
  cuda::ActivationParams fused = ap;
  fused.out = dout.get();
  cuda::w4_mma_gemm1_activation(wt, da.get(), fused, E, off, total, nullptr);
  FMOE_CUDA(cudaDeviceSynchronize());

  std::vector<uint16_t> want(static_cast<size_t>(total) * N), got(want.size());
  dout_ref.download(want.data(), want.size() * 2);
  dout.download(got.data(), got.size() * 2);
  int bad = 0, nonzero = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    nonzero += (want[i] & 0x7fff) != 0;
    if (got[i] != want[i] && ++bad <= 5)
      ADD_FAILURE() << "stored element " << i << " (row " << i / N << "): fused " << got[i] << ", unfused " << want[i];
  }
  EXPECT_EQ(bad, 0);
  EXPECT_GT(nonzero, static_cast<int>(want.size() / 2)) << "the reference is mostly zeros: a weak comparison";
}

// A call the fused path takes (MXFP4, k = 256, gated SiLU, bf16, 8 experts with a row each) unless a switch
// turns it off (FUSEDMOE_W4_MMA_ACT=0, FUSEDMOE_W4_LEAN=0): the tests below are skipped then, with the reason.
struct Call {
  cuda::W4Weights w;
  cuda::ActivationParams ap;
};
Call qualifying_call() {
  Call c;
  c.w.format = Format::MXFP4;
  c.w.n = 256;
  c.w.k = 256;
  c.ap.R = 256;
  c.ap.N = 128;
  c.ap.act = Activation::SILU;
  c.ap.op = cuda::Operand::BF16;
  c.ap.quant = cuda::Fp8Quant::NONE;
  return c;
}
const char* switched_off() {
  const Call c = qualifying_call();
  return cuda::w4_mma_act_refusal(c.w, c.ap, 8, 8);
}

TEST(W4MmaActGpu, BitwiseEqualToUnfusedStages) {
  FMOE_REQUIRE_GPU();
  if (const char* why = switched_off()) GTEST_SKIP() << why;
  uint64_t seed = 21;
  // 1..8 rows per expert and empty experts; N = 200 (R = 400: the last block holds 8 of its 32 outputs); k = 448 (the
  // plain instance with a last stage of 192 values: k % 256 in 1..128 would be MXFP4's tail case, refused).
  const std::vector<int32_t> rows{3, 0, 1, 8, 5, 0, 2, 7};
  for (Format f : {Format::MXFP4, Format::NVFP4})
    for (bool interleaved : {false, true})
      for (Activation act : {Activation::SILU, Activation::GELU, Activation::GELU_TANH, Activation::SWIGLUOAI}) {
        const bool odd = (static_cast<int>(act) + interleaved) % 2 == 1;
        const GateUpOrder order = odd ? GateUpOrder::UP_GATE : GateUpOrder::GATE_UP;
        const cuda::KOrder ko = odd ? cuda::KOrder::NATURAL : cuda::KOrder::W4_MMA;
        run_case({f, odd, interleaved, odd, order, act, rows, 200, 448, ko}, seed++);
      }
  // k % 256 = 128 (NVFP4: the plain instance's last half stage; MXFP4 there is refused, below) and the kFullK
  // instances (k % 256 == 0, k >= 4096), both formats.
  run_case({Format::NVFP4, true, true, true, GateUpOrder::GATE_UP, Activation::SWIGLUOAI, rows, 96, 384,
            cuda::KOrder::W4_MMA},
           seed++);
  for (Format f : {Format::MXFP4, Format::NVFP4})
    run_case({f, false, false, true, GateUpOrder::UP_GATE, Activation::SILU, rows, 64, 4352, cuda::KOrder::W4_MMA},
             seed++);
  // k % 128 = 32 (a last sub-chunk partly inside k).
  run_case({Format::NVFP4, true, false, false, GateUpOrder::GATE_UP, Activation::GELU, rows, 136, 288,
            cuda::KOrder::W4_MMA},
           seed++);
}

TEST(W4MmaActGpu, Refusals) {
  if (const char* why = switched_off()) GTEST_SKIP() << why;
  const auto [w, ap] = qualifying_call();
  // The 8-token tile's bound (6 expected rows per expert), unless FUSEDMOE_W4_TILE_ROWS moves it (the session-end runs
  // these tests with the bounds of before too).
  if (std::getenv("FUSEDMOE_W4_TILE_ROWS") == nullptr) {
    EXPECT_EQ(cuda::w4_mma_act_refusal(w, ap, 8, 48), nullptr);  // 6 rows per expert: 8-token passes
    EXPECT_NE(cuda::w4_mma_act_refusal(w, ap, 8, 56), nullptr);  // 7 expected rows: 16-token passes
  }
  cuda::ActivationParams q = ap;
  q.quant = cuda::Fp8Quant::ROW;
  EXPECT_NE(cuda::w4_mma_act_refusal(w, q, 8, 8), nullptr);
  q = ap;
  q.act = Activation::RELU2;
  EXPECT_NE(cuda::w4_mma_act_refusal(w, q, 8, 8), nullptr);
  q = ap;
  q.N = 124;
  q.R = 248;
  cuda::W4Weights w2 = w;
  w2.n = 248;
  EXPECT_NE(cuda::w4_mma_act_refusal(w2, q, 8, 8), nullptr);  // N % 8 != 0
  cuda::W4Weights tail = w;  // MXFP4 where its tail instance runs (k % 256 in 1..128): measured slower fused
  tail.k = 384;
  EXPECT_NE(cuda::w4_mma_act_refusal(tail, ap, 8, 8), nullptr);
  tail.format = Format::NVFP4;
  EXPECT_EQ(cuda::w4_mma_act_refusal(tail, ap, 8, 8), nullptr);
  cuda::W4Weights i4 = w;
  i4.format = Format::W4A8_INT4;
  EXPECT_NE(cuda::w4_mma_act_refusal(i4, ap, 8, 8), nullptr);
}

}  // namespace
}  // namespace fusedmoe::gputest
