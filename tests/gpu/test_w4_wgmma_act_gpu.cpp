// GEMM1 with the gated activation in the 4-bit wgmma kernel's epilogue (w4_wgmma_gemm1_activation,
// src/cuda/w4_wgmma.cu) against the unfused stages it replaces: the same kernel writing fp32 h,
// then the activation kernel (launch_activation). The epilogue runs the activation kernel's
// arithmetic on the same sums, so the outputs must be the same bytes:
// - GEMM2's bf16 operand (bf16 activations: quant NONE) for MXFP4 and NVFP4 (with its per-expert
//   global scale), linear and swizzled scales, gate / up rows in halves and interleaved, both
//   orders, every gated activation, with and without fc1 bias;
// - per-token fp8 activations (quant ROW): the fused kernel's bf16 rows, quantised per row by the
//   quantise-only pass, give the codes (as bf16 values) and row scales of the activation kernel,
//   with a per-row activation scale in the dequant; NVFP4 W4A4 (quant NVFP4) the same with the
//   1 x 16 block quantisation and per-expert global scales;
// - rows per expert that cut the 256-token tile and its 128-token halves, empty experts, N not a
//   multiple of the kernel's 64 outputs per CTA.
// The two outputs start from different poison bytes, so an output either path skips fails.
// And at the layer: MXFP4 / NVFP4 layers at large batches launch the fused kernel (its launch
// count) and match the oracle.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
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

enum class Quant { NONE, ROW, NVFP4 };  // GEMM2's operand: bf16, per-token fp8 rows, nvfp4 rows

struct ActCase {
  Format format;
  bool swizzled, interleaved, bias;
  Quant quant;
  GateUpOrder order;
  Activation act;
  std::vector<int32_t> rows;  // per expert
  int64_t N, k;
  bool kperm = false;  // the fused path writes GEMM2's operand in the wgmma kernel's k order (N % 64 == 0)
};

std::string describe(const ActCase& c) {
  return std::string(c.format == Format::MXFP4 ? "mxfp4" : "nvfp4") + (c.swizzled ? " swizzled" : " linear") +
         (c.interleaved ? " interleaved" : " halves") + (c.order == GateUpOrder::GATE_UP ? " gate-up" : " up-gate") +
         (c.bias ? " bias" : "") + (c.quant == Quant::ROW ? " fp8 rows" : c.quant == Quant::NVFP4 ? " nvfp4 rows" : " bf16") + " act " + std::to_string(static_cast<int>(c.act)) +
         " N " + std::to_string(c.N) + " k " + std::to_string(c.k) + (c.kperm ? " kperm" : "");
}

void run_case(const ActCase& c, uint64_t seed) {
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
  std::vector<float> a_row(static_cast<size_t>(total) + 1), in_scale(E);
  for (auto& s : a_row) s = std::ldexp(1.0f + static_cast<float>(rng() % 64) / 64.0f, static_cast<int>(rng() % 7) - 3);
  for (auto& s : in_scale) s = 0.002f * static_cast<float>(1 + rng() % 50);  // nvfp4 activation input scales

  // The kernel takes its operand in its k order (w4_kperm.cuh).
  DeviceBuffer dw = to_device(w), ds = to_device(scales), da = to_device(korder_rows(a, cuda::KOrder::W4_WGMMA)), doff = to_device(offsets),
               drow_e = to_device(row_expert), dbias = to_device(bias), dwe = to_device(w_expert), dar = to_device(a_row),
               din = to_device(in_scale);
  const std::vector<int32_t> count{total};
  DeviceBuffer dcount = to_device(count);
  const size_t out_bytes = static_cast<size_t>(total) * N * 2 + 16, h_bytes = static_cast<size_t>(total) * R * 4 + 16;
  DeviceBuffer dh(h_bytes), dout_ref(out_bytes), dout(out_bytes), drows16(out_bytes), dscale_ref(total * 4 + 16),
      dscale(total * 4 + 16);
  FMOE_CUDA(cudaMemset(dout_ref.get(), 0x00, out_bytes));
  FMOE_CUDA(cudaMemset(dout.get(), 0xFF, out_bytes));
  FMOE_CUDA(cudaMemset(drows16.get(), 0xFF, out_bytes));
  FMOE_CUDA(cudaMemset(dscale_ref.get(), 0x00, total * 4 + 16));
  FMOE_CUDA(cudaMemset(dscale.get(), 0xFF, total * 4 + 16));

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
  ap.dq.kind = cuda::Dequant::GENERIC;
  if (c.format == Format::NVFP4) ap.dq.w_expert = static_cast<const float*>(dwe.get());
  if (c.quant == Quant::ROW) ap.dq.a_row = static_cast<const float*>(dar.get());
  if (c.quant == Quant::NVFP4) {  // the layer's GEMM1 dequant has the activation input scale too
    ap.dq.a_expert = static_cast<const float*>(din.get());
    ap.nvfp4_input_scale = static_cast<const float*>(din.get());
  }
  ap.act_dtype = DType::BF16;
  ap.op = cuda::Operand::BF16;
  ap.quant = c.quant == Quant::ROW ? cuda::Fp8Quant::ROW : c.quant == Quant::NVFP4 ? cuda::Fp8Quant::NVFP4 : cuda::Fp8Quant::NONE;
  const bool rows16 = c.quant != Quant::NONE;
  ASSERT_EQ(cuda::w4_wgmma_act_refusal(wt, ap, rows16), nullptr);

  // Unfused: fp32 h, then the activation kernel.
  const auto* off = static_cast<const int32_t*>(doff.get());
  cuda::w4_wgmma_grouped_gemm(wt, da.get(), static_cast<float*>(dh.get()), E, off, total, nullptr);
  cuda::ActivationParams ref = ap;
  ref.out = dout_ref.get();
  ref.row_scale = static_cast<float*>(dscale_ref.get());
  cuda::launch_activation(ref, total, nullptr);

  // Fused.
  cuda::ActivationParams fused = ap;
  fused.out = dout.get();
  fused.korder = c.kperm ? cuda::KOrder::W4_WGMMA : cuda::KOrder::NATURAL;
  fused.row_scale = static_cast<float*>(dscale.get());
  if (rows16) {
    auto* rows = static_cast<uint16_t*>(drows16.get());
    cuda::w4_wgmma_gemm1_activation(wt, da.get(), fused, rows, E, off, total, nullptr);
    fused.act_bf16 = rows;
    cuda::launch_activation(fused, total, nullptr);
  } else {
    cuda::w4_wgmma_gemm1_activation(wt, da.get(), fused, nullptr, E, off, total, nullptr);
  }
  FMOE_CUDA(cudaDeviceSynchronize());

  std::vector<uint16_t> want(static_cast<size_t>(total) * N), got(want.size());
  dout_ref.download(want.data(), want.size() * 2);
  dout.download(got.data(), got.size() * 2);
  int bad = 0, nonzero = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    nonzero += (want[i] & 0x7fff) != 0;
    // kperm: output i of a row stored at its place in the k order (w4_kperm.cuh).
    const uint16_t g = got[c.kperm ? static_cast<size_t>(cuda::w4_kperm_pos(static_cast<int64_t>(i))) : i];
    if (g != want[i] && ++bad <= 5)
      ADD_FAILURE() << "row " << i / N << " output " << i % N << ": fused " << g << ", unfused " << want[i];
  }
  EXPECT_EQ(bad, 0);
  EXPECT_GT(nonzero, static_cast<int>(want.size() / 2)) << "the reference is mostly zeros: a weak comparison";
  if (c.quant == Quant::ROW) {
    std::vector<float> s_want(total), s_got(total);
    dscale_ref.download(s_want.data(), s_want.size() * 4);
    dscale.download(s_got.data(), s_got.size() * 4);
    EXPECT_EQ(0, std::memcmp(s_want.data(), s_got.data(), s_want.size() * 4)) << "row scales differ";
  }
}

TEST(W4WgmmaActGpu, BitwiseEqualToUnfusedStages) {
  FMOE_REQUIRE_GPU();
  uint64_t seed = 11;
  // Rows per expert: 130 (a 128 + 2 split: wgmma widths 128 / 32), 0, 1, 257 (a full tile + 1),
  // 99, 40; N = 200 (R = 400: the last CTA holds 8 of its 64 outputs); k = 320 (5 stages).
  const std::vector<int32_t> rows{130, 0, 1, 257, 99, 40};
  for (Format f : {Format::MXFP4, Format::NVFP4})
    for (bool interleaved : {false, true})
      for (Activation act : {Activation::SILU, Activation::GELU, Activation::GELU_TANH, Activation::SWIGLUOAI}) {
        const bool odd = (static_cast<int>(act) + interleaved) % 2 == 1;
        const GateUpOrder order = odd ? GateUpOrder::UP_GATE : GateUpOrder::GATE_UP;
        run_case({f, odd, interleaved, odd, Quant::NONE, order, act, rows, 200, 320}, seed++);
      }
  // N odd: a partial group of 8 outputs in the last CTA, no even split of the outputs.
  run_case({Format::MXFP4, false, false, true, Quant::NONE, GateUpOrder::UP_GATE, Activation::SILU, rows, 99, 192}, seed++);
  run_case({Format::NVFP4, true, true, false, Quant::NONE, GateUpOrder::GATE_UP, Activation::SWIGLUOAI, rows, 99, 192},
           seed++);
  // GEMM2's operand in the wgmma kernel's k order (the layers whose GEMM2 runs on it): N = 192.
  run_case({Format::MXFP4, false, false, true, Quant::NONE, GateUpOrder::GATE_UP, Activation::SILU, rows, 192, 320, true},
           seed++);
  run_case({Format::NVFP4, true, true, false, Quant::NONE, GateUpOrder::UP_GATE, Activation::SWIGLUOAI, rows, 192, 192,
            true},
           seed++);
  // 113..192 rows per expert: both kernels take the instance pairing every second half (n160 / n192 / n256).
  auto rule = [](const std::vector<int32_t>& rows, int64_t k, bool act) {
    return cuda::w4_wgmma_pair_rule(std::accumulate(rows.begin(), rows.end(), int64_t{0}), static_cast<int>(rows.size()),
                                    k, act);
  };
  const std::vector<int32_t> mid{130, 150, 170, 0, 190, 100, 129, 250};
  ASSERT_EQ(rule(mid, 320, true), cuda::W4WgmmaPair::ALL);
  ASSERT_EQ(rule(mid, 320, false), cuda::W4WgmmaPair::ALL);
  run_case({Format::MXFP4, true, true, false, Quant::NONE, GateUpOrder::UP_GATE, Activation::SWIGLUOAI, mid, 200, 320},
           seed++);
  run_case({Format::NVFP4, false, false, true, Quant::NONE, GateUpOrder::GATE_UP, Activation::GELU, mid, 192, 192, true},
           seed++);
  // 113..160 rows per expert at k >= kW4FineMinKAct: both kernels take the instance with second halves of 16 / 32
  // rows (the fused one; its 8 / 24-row halves run on the 16 / 32-row mainloops) and 8 .. 32 (the fp32-D one).
  const std::vector<int32_t> fine{130, 150, 137, 0, 145, 100, 129, 250, 160};  // 138 rows per expert
  ASSERT_EQ(rule(fine, cuda::kW4FineMinKAct, true), cuda::W4WgmmaPair::FINE);
  ASSERT_EQ(rule(fine, cuda::kW4FineMinKAct, false), cuda::W4WgmmaPair::FINE);
  ASSERT_EQ(rule(fine, cuda::kW4FineMinKAct - 64, true), cuda::W4WgmmaPair::ALL);
  run_case({Format::MXFP4, true, true, false, Quant::NONE, GateUpOrder::UP_GATE, Activation::SWIGLUOAI, fine, 200,
            cuda::kW4FineMinKAct},
           seed++);
  run_case({Format::NVFP4, false, false, true, Quant::NONE, GateUpOrder::GATE_UP, Activation::GELU, fine, 192,
            cuda::kW4FineMinKAct, true},
           seed++);
  // More than 192 rows per expert: both kernels take the paired instance (full tiles on one m64n256k16).
  const std::vector<int32_t> full{256, 300, 200, 0, 250};
  ASSERT_EQ(rule(full, 320, true), cuda::W4WgmmaPair::FULL);
  run_case({Format::MXFP4, false, false, true, Quant::NONE, GateUpOrder::GATE_UP, Activation::SILU, full, 200, 320}, seed++);
  run_case({Format::NVFP4, true, true, false, Quant::NONE, GateUpOrder::UP_GATE, Activation::SWIGLUOAI, full, 192, 192,
            true},
           seed++);
  // 249..288 rows per expert: both kernels take the 288-token-tile instance (rows 256..287 on a third
  // m64n32k16; 289 = a 288-token tile + 1, 513 = 288 + 225).
  const std::vector<int32_t> wide{270, 288, 289, 0, 256, 257, 240, 513};
  ASSERT_EQ(rule(wide, 320, true), cuda::W4WgmmaPair::WIDE);
  run_case({Format::MXFP4, true, true, false, Quant::NONE, GateUpOrder::UP_GATE, Activation::SWIGLUOAI, wide, 200, 320},
           seed++);
  run_case({Format::NVFP4, false, false, true, Quant::NONE, GateUpOrder::GATE_UP, Activation::SILU, wide, 192, 192, true},
           seed++);
  // N = 99 (not a multiple of 8: the fused kernel's unstaged epilogue, the third part's included).
  run_case({Format::MXFP4, false, true, true, Quant::NONE, GateUpOrder::GATE_UP, Activation::GELU, wide, 99, 128}, seed++);
}

TEST(W4WgmmaActGpu, PerTokenFp8RowsBitwiseEqualToUnfused) {
  FMOE_REQUIRE_GPU();
  uint64_t seed = 101;
  for (bool interleaved : {false, true})
    for (Activation act : {Activation::SILU, Activation::SWIGLUOAI})
      run_case({Format::MXFP4, interleaved, interleaved, true, Quant::ROW,
                interleaved ? GateUpOrder::GATE_UP : GateUpOrder::UP_GATE, act, {65, 200, 0, 33}, 136, 192},
               seed++);
  // The quantise pass writing GEMM2's operand in the wgmma kernel's k order: N = 192.
  run_case({Format::MXFP4, false, true, true, Quant::ROW, GateUpOrder::GATE_UP, Activation::SILU, {65, 200, 0, 33}, 192,
            192, true},
           seed++);
}

// NVFP4 W4A4: the fused kernel's bf16 rows, quantised to nvfp4 by quantise_bf16_nvfp4_kernel (per
// expert global scale), give the activation kernel's operand; N = 144: 9 16-wide blocks per row.
TEST(W4WgmmaActGpu, Nvfp4RowsBitwiseEqualToUnfused) {
  FMOE_REQUIRE_GPU();
  uint64_t seed = 201;
  for (bool interleaved : {false, true})
    for (Activation act : {Activation::SILU, Activation::SWIGLUOAI})
      run_case({Format::NVFP4, !interleaved, interleaved, interleaved, Quant::NVFP4, GateUpOrder::GATE_UP, act,
                {65, 200, 0, 33}, 144, 192},
               seed++);
  run_case({Format::NVFP4, true, false, true, Quant::NVFP4, GateUpOrder::GATE_UP, Activation::SILU, {65, 200, 0, 33},
            192, 192, true},
           seed++);
}

// Layers through run(): the fused kernel is the one launched (fused_gemm1_launches), and the
// result matches the oracle (check_case: plain run and graph replay bitwise equal).
TEST(W4WgmmaActGpu, LayerRunsFusedPath) {
  FMOE_REQUIRE_GPU();
  struct L {
    Format f;
    ActDtype a;
    Activation act;
    bool interleaved, swizzled, bias;
  };
  for (const L& l : {L{Format::MXFP4, ActDtype::BF16, Activation::SWIGLUOAI, true, false, true},
                     L{Format::NVFP4, ActDtype::BF16, Activation::SILU, false, true, true},
                     L{Format::MXFP4, ActDtype::FP8, Activation::SILU, false, false, false},
                     L{Format::NVFP4, ActDtype::NVFP4, Activation::SWIGLUOAI, false, false, true}}) {
    Case c;
    c.format = l.f;
    c.act_dtype = l.a;
    c.act = l.act;
    c.interleaved = l.interleaved;
    c.swizzled = l.swizzled;
    c.bias = l.bias;
    c.order = GateUpOrder::GATE_UP;
    c.M = 300;  // 150 rows per expert: the wgmma way
    c.K = 256;
    c.N = 192;
    c.E = 4;
    c.topk = 2;
    c.seed = 900 + static_cast<uint64_t>(l.f) * 10 + static_cast<uint64_t>(l.a);
    c.w_gain = l.act == Activation::SWIGLUOAI ? 6.0f : 1.0f;
    SCOPED_TRACE(describe(c));
    ASSERT_TRUE(cuda::w4_use_dequant(c.M * c.topk, static_cast<int>(c.E), cuda::w4_wgmma_min_rows_per_expert(l.f)));
    check_case(c);
    const LayerFile lf = make_layer(c);
    const Inputs in = make_inputs(c, c.E);
    DeviceLayer dl(lf);
    Layer layer(lf.config, dl.weights);
    DeviceRun run(layer, in);
    // The fused kernel ran: its host entry counts its launches (a stage time cannot tell at this
    // size: the unfused activation kernel takes a few microseconds here too).
    const int64_t before = cuda::fused_gemm1_launches(cuda::FusedGemm1::FOUR_BIT);
    layer.run_timed(run.args);
    EXPECT_EQ(cuda::fused_gemm1_launches(cuda::FusedGemm1::FOUR_BIT), before + 1) << "GEMM1 + activation was not the fused kernel";
  }
}

TEST(W4WgmmaActGpu, RefusesWhatItCannotTake) {
  cuda::W4Weights w;
  w.format = Format::MXFP4;
  w.n = 256;
  w.k = 128;
  alignas(16) static uint8_t buf[16];
  w.w = buf;
  w.scale = buf;
  cuda::ActivationParams ap;
  ap.R = 256;
  ap.N = 128;
  ap.dq.kind = cuda::Dequant::GENERIC;
  ap.op = cuda::Operand::BF16;
  EXPECT_EQ(cuda::w4_wgmma_act_refusal(w, ap, false), nullptr);
  ap.act = Activation::RELU2;
  EXPECT_NE(cuda::w4_wgmma_act_refusal(w, ap, false), nullptr);
  ap.act = Activation::SILU;
  ap.quant = cuda::Fp8Quant::NVFP4;  // W4A4: a 1 x 16 block quantisation of the output, from bf16 rows
  EXPECT_NE(cuda::w4_wgmma_act_refusal(w, ap, false), nullptr);
  EXPECT_EQ(cuda::w4_wgmma_act_refusal(w, ap, true), nullptr);
  ap.quant = cuda::Fp8Quant::ROW;
  EXPECT_NE(cuda::w4_wgmma_act_refusal(w, ap, false), nullptr);  // per-token fp8 needs the bf16 rows
  EXPECT_EQ(cuda::w4_wgmma_act_refusal(w, ap, true), nullptr);
  ap.act_dtype = DType::F16;  // rows rounded to fp16 are not exact in bf16
  EXPECT_NE(cuda::w4_wgmma_act_refusal(w, ap, true), nullptr);
  ap.act_dtype = DType::BF16;
  ap.N = 100;  // 2N != the weight rows
  EXPECT_NE(cuda::w4_wgmma_act_refusal(w, ap, true), nullptr);
  ap.N = 128;
  w.format = Format::W4A8_INT4;
  EXPECT_NE(cuda::w4_wgmma_act_refusal(w, ap, true), nullptr);
}

}  // namespace
}  // namespace fusedmoe::gputest
