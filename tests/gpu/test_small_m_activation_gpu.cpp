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
#include "gpu/gated_act_problem.hpp"
#include "gpu/gpu_test_util.hpp"
#include "gpu/operand_util.hpp"

namespace fusedmoe::gputest {
namespace {

class SmallMActivation : public ::testing::TestWithParam<ActCase> {};

TEST_P(SmallMActivation, SameBytesAsGemmThenActivation) {
  FMOE_REQUIRE_GPU();
  const ActCase c = GetParam();
  // 40 experts; rows: 1, 9 (two row batches), 2, 1 on four of them (13 <= 16 rows, 13 * 4 > 40 is
  // fine: the small-M path needs rows <= experts).
  std::vector<int32_t> counts(40, 0);
  counts[3] = 1, counts[11] = 9, counts[20] = 2, counts[39] = 1;
  GatedActProblem pr(c, counts, static_cast<uint32_t>(c.N * 17 + c.K + static_cast<int>(c.act) * 5 + c.interleaved));
  const cuda::GroupedGemmArgs& g = pr.g;
  const cuda::ActivationParams& p = pr.p;
  const int64_t rows = pr.rows;
  const size_t elem = pr.elem;
  ASSERT_TRUE(cuda::small_m_activation_applies(g, p)) << "the case must take the fused path";

  auto run = [&](bool fused, bool mma = false) {
    using K = cuda::SmallMActivationKernel;
    return pr.poisoned_run([&] {
      if (fused) {
        cuda::small_m_gemm1_activation(g, p, nullptr, mma ? K::MMA : K::FMA);
      } else {
        cuda::small_m_grouped_gemm(g, nullptr);
        cuda::launch_activation(p, rows, nullptr);
      }
    });
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
    [](const auto& info) { return act_case_name(info.param); });

}  // namespace
}  // namespace fusedmoe::gputest
