// GEMM1 and the activation in one kernel (small_m_activation.cu) against the two kernels it
// replaces (small-M GEMM1, then the activation kernel) on the same inputs: the same bytes of
// GEMM2's operand for every gated activation, both gate/up orders, halves and interleaved,
// bias, tensor dequant, bf16 / fp16 conversion and static fp8 quantisation, short and long rows,
// an expert with more rows than one pass (9 > 8) and experts without rows. The tensor-core
// kernel (the default for fp8) is checked against the same pair to within one step of the output type
// (or 2^-10 of the largest output).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/grouped_gemm.hpp"
#include "fusedmoe/codecs.hpp"
#include "cuda/moe_kernels.hpp"
#include "cuda/small_m_activation.hpp"
#include "gpu/gpu_test_util.hpp"
#include "gpu/operand_util.hpp"

namespace fusedmoe::gputest {
namespace {

using cuda::ActivationParams;
using cuda::Dequant;
using cuda::Fp8Quant;

struct ActCase {
  Operand op;
  Activation act;
  bool interleaved;
  GateUpOrder order;
  bool bias;
  int64_t N, K;  // N: intermediate (activation outputs), K: hidden (GEMM1 k)
};

std::string name_of(const ActCase& c) {
  const char* act = c.act == Activation::SILU ? "silu" : c.act == Activation::GELU ? "gelu"
                    : c.act == Activation::GELU_TANH ? "gelutanh" : "swigluoai";
  return std::string(c.op == Operand::BF16 ? "bf16" : c.op == Operand::FP16 ? "fp16" : "fp8") + "_" + act +
         (c.interleaved ? "_interleaved" : "") + (c.order == GateUpOrder::UP_GATE ? "_upgate" : "") +
         (c.bias ? "_bias" : "") + "_N" + std::to_string(c.N) + "_K" + std::to_string(c.K);
}

class SmallMActivation : public ::testing::TestWithParam<ActCase> {};

TEST_P(SmallMActivation, SameBytesAsGemmThenActivation) {
  FMOE_REQUIRE_GPU();
  const ActCase c = GetParam();
  const int64_t R = 2 * c.N;
  // 40 experts; rows: 1, 9 (two row batches), 2, 1 on four of them (13 <= 16 rows, 13 * 4 > 40 is
  // fine: the small-M path needs rows <= experts).
  std::vector<int32_t> counts(40, 0);
  counts[3] = 1, counts[11] = 9, counts[20] = 2, counts[39] = 1;
  const int E = static_cast<int>(counts.size());
  std::vector<int32_t> offsets(E + 1, 0);
  for (int e = 0; e < E; ++e) offsets[e + 1] = offsets[e] + counts[e];
  const int64_t rows = offsets[E];
  std::vector<int32_t> row_expert(rows);
  for (int e = 0; e < E; ++e)
    for (int32_t r = offsets[e]; r < offsets[e + 1]; ++r) row_expert[r] = e;
  std::mt19937 rng(static_cast<uint32_t>(c.N * 17 + c.K + static_cast<int>(c.act) * 5 + c.interleaved));
  const Operands a = random_operand(c.op, rows * c.K, 1.0f, rng);
  const size_t elem = c.op == Operand::FP8 ? 1 : 2, expert_bytes = static_cast<size_t>(R * c.K) * elem;
  DeviceBuffer a_d(a.bytes.size()), w_d(E * expert_bytes);
  a_d.upload(a.bytes.data(), a.bytes.size());
  FMOE_CUDA(cudaMemset(w_d.get(), 0xFF, E * expert_bytes));  // NaN: experts without rows are never read
  for (int e = 0; e < E; ++e)
    if (counts[e] > 0) {
      const Operands w = random_operand(c.op, R * c.K, 0.05f, rng);
      FMOE_CUDA(cudaMemcpy(static_cast<char*>(w_d.get()) + e * expert_bytes, w.bytes.data(), expert_bytes,
                           cudaMemcpyHostToDevice));
    }
  std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
  std::vector<float> bias(E * R), w_tensor(E);
  for (auto& v : bias) v = ud(rng);
  for (auto& v : w_tensor) v = 0.5f + 0.5f * (ud(rng) + 1.0f);
  const std::vector<float> scales = {0.8f /* a-scale of GEMM1 */, 0.02f /* static scale of GEMM2's input */};
  auto upload = [](const auto& v) {
    DeviceBuffer b(v.size() * sizeof(v[0]));
    b.upload(v.data(), v.size() * sizeof(v[0]));
    return b;
  };
  DeviceBuffer off_d = upload(offsets), re_d = upload(row_expert), bias_d = upload(bias), wt_d = upload(w_tensor),
               sc_d = upload(scales), h_d(rows * R * 4), out_d(rows * c.N * elem);

  cuda::GroupedGemmArgs g;
  g.op = c.op;
  g.a = a_d.get();
  g.b = w_d.get();
  g.d = static_cast<float*>(h_d.get());
  g.n = R;
  g.k = c.K;
  g.groups = E;
  g.expert_offsets = static_cast<const int32_t*>(off_d.get());
  g.max_rows = rows;
  ActivationParams p;
  p.h = static_cast<const float*>(h_d.get());
  p.R = R;
  p.N = c.N;
  p.row_expert = static_cast<const int32_t*>(re_d.get());
  p.rows = static_cast<const int32_t*>(off_d.get()) + E;
  p.act = c.act;
  p.order = c.order;
  p.interleaved = c.interleaved;
  p.bias = c.bias ? static_cast<const float*>(bias_d.get()) : nullptr;
  p.act_dtype = c.op == Operand::FP16 ? DType::F16 : DType::BF16;
  p.out = out_d.get();
  p.op = c.op;
  if (c.op == Operand::FP8) {
    p.dq.kind = Dequant::TENSOR;
    p.dq.a_tensor = {static_cast<const float*>(sc_d.get()), false};
    p.dq.w = static_cast<const float*>(wt_d.get());
    p.quant = Fp8Quant::TENSOR_STATIC;
    p.scale = {static_cast<const float*>(sc_d.get()) + 1, false};
  }
  ASSERT_TRUE(cuda::small_m_activation_applies(g, p)) << "the case must take the fused path";

  auto run = [&](bool fused, bool mma = false) {
    using K = cuda::SmallMActivationKernel;
    FMOE_CUDA(cudaMemset(out_d.get(), 0xA5, out_d.bytes()));  // poison (not a valid output pattern)
    if (fused) {
      cuda::small_m_gemm1_activation(g, p, nullptr, mma ? K::MMA : K::FMA);
    } else {
      cuda::small_m_grouped_gemm(g, nullptr);
      cuda::launch_activation(p, rows, nullptr);
    }
    FMOE_CUDA(cudaDeviceSynchronize());
    std::vector<uint8_t> h(out_d.bytes());
    out_d.download(h.data(), h.size());
    return h;
  };
  const auto unfused = run(false);
  const auto fused = run(true);
  for (size_t i = 0; i < fused.size(); ++i)
    ASSERT_EQ(unfused[i], fused[i]) << "byte " << i << " (row " << i / elem / c.N << ", output "
                                    << (i / elem) % c.N << ")";
  ASSERT_EQ(fused, run(true)) << "two fused runs differ";

  // The tensor-core kernel sums in the MMA's order: every output within one step of the output
  // type (adjacent bf16 / fp16 / e4m3 codes of the same sign) or within 2^-10 of the largest
  // output (cancellation in gate or up: a tiny result several steps apart), and the same bytes
  // on a second run.
  const auto mma = run(true, true);
  const int64_t outputs = static_cast<int64_t>(mma.size() / elem);
  auto value = [&](const std::vector<uint8_t>& v, int64_t i) {
    if (elem == 1) return e4m3_to_float(v[i]);
    uint16_t b = 0;
    std::memcpy(&b, &v[i * 2], 2);
    return c.op == Operand::BF16 ? bf16_bits_to_float(b) : fp16_bits_to_float(b);
  };
  float largest = 0.0f;
  for (int64_t i = 0; i < outputs; ++i) largest = std::max(largest, std::fabs(value(unfused, i)));
  int64_t differ = 0;
  for (int64_t i = 0; i < outputs; ++i) {
    uint32_t x = 0, y = 0;
    std::memcpy(&x, &unfused[i * elem], elem);
    std::memcpy(&y, &mma[i * elem], elem);
    const uint32_t sign = elem == 1 ? 0x80u : 0x8000u;
    const int64_t dx = x & (sign - 1u), dy = y & (sign - 1u);
    const bool step = (x & sign) == (y & sign) && (dx > dy ? dx - dy : dy - dx) <= 1;
    const float vx = value(unfused, i), vy = value(mma, i);
    ASSERT_TRUE(std::isfinite(vy)) << "output " << i;
    ASSERT_TRUE(step || std::fabs(vx - vy) <= largest / 1024.0f)
        << "output " << i << " (row " << i / c.N << ", output " << i % c.N << "): FMA kernel " << vx << " (0x"
        << std::hex << x << "), MMA kernel " << vy << " (0x" << y << ")";
    differ += x != y;
  }
  EXPECT_LT(differ, outputs / 4 + 1) << "the MMA kernel differs from the FMA sums in more than a quarter of outputs";
  ASSERT_EQ(mma, run(true, true)) << "two MMA runs differ";
}

// K = 256 fp8 rows of 256 B (4 lanes per row), 768 (fp8 8 / bf16 32 lanes: a partial pass), 2048
// (several passes); N = 100 leaves the last block partial, 384 / 768 whole.
INSTANTIATE_TEST_SUITE_P(
    Cases, SmallMActivation,
    ::testing::Values(ActCase{Operand::BF16, Activation::SILU, false, GateUpOrder::GATE_UP, false, 384, 2048},
                      ActCase{Operand::BF16, Activation::GELU, true, GateUpOrder::GATE_UP, true, 100, 768},
                      ActCase{Operand::FP16, Activation::GELU_TANH, false, GateUpOrder::UP_GATE, true, 384, 768},
                      ActCase{Operand::BF16, Activation::SWIGLUOAI, true, GateUpOrder::GATE_UP, true, 768, 256},
                      ActCase{Operand::FP8, Activation::SILU, false, GateUpOrder::GATE_UP, false, 768, 2048},
                      ActCase{Operand::FP8, Activation::SWIGLUOAI, false, GateUpOrder::UP_GATE, true, 100, 256},
                      ActCase{Operand::FP8, Activation::GELU, true, GateUpOrder::GATE_UP, false, 384, 768},
                      // N = 1280: 160 output blocks x 13 experts' bound >= 2048 blocks, the MMA
                      // kernel's 4-warp variant (the cases above take the 8-warp one).
                      ActCase{Operand::FP8, Activation::SILU, false, GateUpOrder::GATE_UP, true, 1280, 256},
                      ActCase{Operand::BF16, Activation::SILU, true, GateUpOrder::UP_GATE, false, 1280, 768}),
    [](const auto& info) { return name_of(info.param); });

}  // namespace
}  // namespace fusedmoe::gputest
