// The small-M grouped GEMM (small_m_gemm.cu) called directly, against a float64 host product of
// the same (exactly representable) operands: bf16 / fp16 / e4m3 values, fp32 D. Shapes cover
// what its register streaming must get right: long rows (several passes of 32 lanes x 4 chunks),
// rows whose chunk count is not a multiple of a pass, short rows (below the dispatcher's floor,
// but the kernel must still be right), n not a multiple of the 16 rows of a block, experts with
// no rows, and an expert with more rows than one pass takes (kRowBatch = 8). Every D element of a
// routed row is checked (D is poisoned with NaN first) and a second run must give the same bits.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/grouped_gemm.hpp"
#include "fusedmoe/codecs.hpp"
#include "gpu/gpu_test_util.hpp"
#include "gpu/operand_util.hpp"

namespace fusedmoe::gputest {
namespace {

using cuda::Operand;

// The small-M GEMM's arguments over device buffers: A [rows, k], B [groups, n, k], D [rows, n]
// fp32, expert offsets [groups + 1].
cuda::GroupedGemmArgs gemm_args(Operand op, const DeviceBuffer& a, const DeviceBuffer& b, DeviceBuffer& d,
                                const DeviceBuffer& offsets, int64_t n, int64_t k, int groups, int64_t rows) {
  cuda::GroupedGemmArgs g;
  g.op = op;
  g.a = a.get();
  g.b = b.get();
  g.d = static_cast<float*>(d.get());
  g.n = n;
  g.k = k;
  g.groups = groups;
  g.expert_offsets = static_cast<const int32_t*>(offsets.get());
  g.max_rows = rows;
  return g;
}

class SmallMGemm : public ::testing::TestWithParam<std::tuple<Operand, int64_t, int64_t>> {};

TEST_P(SmallMGemm, MatchesFloat64Product) {
  FMOE_REQUIRE_GPU();
  const auto [op, n, k] = GetParam();
  // Rows per expert: empty experts, single rows, and 11 rows (two passes of kRowBatch).
  const std::vector<int32_t> counts = {0, 1, 11, 0, 1, 2, 0, 1};
  const int groups = static_cast<int>(counts.size());
  std::vector<int32_t> offsets(groups + 1, 0);
  for (int g = 0; g < groups; ++g) offsets[g + 1] = offsets[g] + counts[g];
  const int64_t rows = offsets[groups];
  std::mt19937 rng(static_cast<uint32_t>(n * 131 + k + static_cast<int>(op)));
  const Operands a = random_operand(op, rows * k, 1.0f, rng);
  // Weights only for the experts with rows; the others are NaN bytes (0xFF: NaN in bf16 / fp16 /
  // e4m3) that must never be read (a read would surface as a NaN in D).
  const size_t elem = op == Operand::FP8 ? 1 : 2, expert_bytes = static_cast<size_t>(n * k) * elem;
  std::vector<Operands> b(groups);
  DeviceBuffer a_d(a.bytes.size()), b_d(groups * expert_bytes), d_d(rows * n * 4), off_d(offsets.size() * 4);
  a_d.upload(a.bytes.data(), a.bytes.size());
  FMOE_CUDA(cudaMemset(b_d.get(), 0xFF, groups * expert_bytes));
  for (int e = 0; e < groups; ++e)
    if (counts[e] > 0) {
      b[e] = random_operand(op, n * k, 0.05f, rng);
      FMOE_CUDA(cudaMemcpy(static_cast<char*>(b_d.get()) + e * expert_bytes, b[e].bytes.data(), expert_bytes,
                           cudaMemcpyHostToDevice));
    }
  off_d.upload(offsets.data(), offsets.size() * 4);
  cuda::GroupedGemmArgs g = gemm_args(op, a_d, b_d, d_d, off_d, n, k, groups, rows);
  auto run = [&] {
    FMOE_CUDA(cudaMemset(d_d.get(), 0xFF, rows * n * 4));  // NaN poison
    cuda::small_m_grouped_gemm(g, nullptr);
    FMOE_CUDA(cudaDeviceSynchronize());
    std::vector<float> d(rows * n);
    d_d.download(d.data(), d.size() * 4);
    return d;
  };
  const std::vector<float> d = run();
  double worst = 0.0;
  for (int e = 0; e < groups; ++e)
    for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r)
      for (int64_t c = 0; c < n; ++c) {
        double ref = 0.0, mag = 0.0;
        const float* ar = &a.values[r * k];
        const float* br = &b[e].values[c * k];
        for (int64_t i = 0; i < k; ++i) {
          ref += static_cast<double>(ar[i]) * br[i];
          mag += std::fabs(static_cast<double>(ar[i]) * br[i]);
        }
        const float got = d[r * n + c];
        ASSERT_TRUE(std::isfinite(got)) << "row " << r << " col " << c << " not written";
        // fp32 sums of exact products: the error is bounded by a few ulps of the magnitude sum.
        const double err = std::fabs(got - ref);
        ASSERT_LE(err, 1e-5 * mag + 1e-30) << "row " << r << " col " << c << " got " << got << " want " << ref;
        worst = std::max(worst, err / (mag + 1e-30));
      }
  const std::vector<float> again = run();
  ASSERT_EQ(0, std::memcmp(d.data(), again.data(), d.size() * 4)) << "two runs differ";
  RecordProperty("worst_relative_error", std::to_string(worst));
}

// k = 4096: 8 KB bf16 rows (4 passes); k = 1296: 162 / 81 chunks of 16 bytes (bf16 / fp8, the last
// pass partial); k = 384 and 256: short rows (fp8 L = 8 / 4, bf16 / fp16 L = 16 / 8 lanes per row).
// n = 100 and 7208: the last block partial.
INSTANTIATE_TEST_SUITE_P(Shapes, SmallMGemm,
                         ::testing::Combine(::testing::Values(Operand::BF16, Operand::FP16, Operand::FP8),
                                            ::testing::Values(int64_t{100}, int64_t{7208}),
                                            ::testing::Values(int64_t{4096}, int64_t{1296}, int64_t{384}, int64_t{256})),
                         [](const auto& info) {
                           const Operand op = std::get<0>(info.param);
                           return std::string(op == Operand::BF16 ? "bf16" : op == Operand::FP16 ? "fp16" : "fp8") +
                                  "_n" + std::to_string(std::get<1>(info.param)) + "_k" +
                                  std::to_string(std::get<2>(info.param));
                         });

// fp8-block (small_m_grouped_gemm(..., true)): each 128-wide k block's products times the row's
// activation scale (BLOCK layout: expert e's rows own [k/128, rows_e] column-major from
// offsets[e] * k/128 on) and the weight block's scale ([groups, n/128, k/128]), against float64.
// k = 2048 (32 lanes, one pass of 4 chunks per lane), 384 (8 lanes), 256 (4 lanes); n = 128 and 1280.
class SmallMGemmBlock : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(SmallMGemmBlock, MatchesFloat64Product) {
  FMOE_REQUIRE_GPU();
  const auto [n, k] = GetParam();
  const std::vector<int32_t> counts = {0, 1, 11, 0, 1, 2, 0, 1};
  const int groups = static_cast<int>(counts.size());
  std::vector<int32_t> offsets(groups + 1, 0);
  for (int g = 0; g < groups; ++g) offsets[g + 1] = offsets[g] + counts[g];
  const int64_t rows = offsets[groups], kbs = k / 128, nbs = n / 128;
  std::mt19937 rng(static_cast<uint32_t>(n * 7 + k));
  const Operands a = random_operand(Operand::FP8, rows * k, 1.0f, rng);
  std::vector<Operands> b(groups);
  const size_t expert_bytes = static_cast<size_t>(n * k);
  DeviceBuffer a_d(a.bytes.size()), b_d(groups * expert_bytes), d_d(rows * n * 4), off_d(offsets.size() * 4);
  a_d.upload(a.bytes.data(), a.bytes.size());
  FMOE_CUDA(cudaMemset(b_d.get(), 0xFF, groups * expert_bytes));  // NaN: experts without rows
  for (int e = 0; e < groups; ++e)
    if (counts[e] > 0) {
      b[e] = random_operand(Operand::FP8, n * k, 1.0f, rng);
      FMOE_CUDA(cudaMemcpy(static_cast<char*>(b_d.get()) + e * expert_bytes, b[e].bytes.data(), expert_bytes,
                           cudaMemcpyHostToDevice));
    }
  off_d.upload(offsets.data(), offsets.size() * 4);
  std::uniform_real_distribution<float> ud(0.25f, 4.0f);
  std::vector<float> sa(rows * kbs), sw(groups * nbs * kbs);
  for (auto& v : sa) v = ud(rng) * 1e-3f;
  for (auto& v : sw) v = ud(rng) * 1e-2f;
  DeviceBuffer sa_d(sa.size() * 4), sw_d(sw.size() * 4);
  sa_d.upload(sa.data(), sa.size() * 4);
  sw_d.upload(sw.data(), sw.size() * 4);
  cuda::GroupedGemmArgs g = gemm_args(Operand::FP8, a_d, b_d, d_d, off_d, n, k, groups, rows);
  g.a_scale = static_cast<const float*>(sa_d.get());
  g.b_scale = static_cast<const float*>(sw_d.get());
  ASSERT_TRUE(cuda::small_m_block_scales_ok(g));
  auto run = [&] {
    FMOE_CUDA(cudaMemset(d_d.get(), 0xFF, rows * n * 4));  // NaN poison
    cuda::small_m_grouped_gemm(g, nullptr, true);
    FMOE_CUDA(cudaDeviceSynchronize());
    std::vector<float> d(rows * n);
    d_d.download(d.data(), d.size() * 4);
    return d;
  };
  const std::vector<float> d = run();
  for (int e = 0; e < groups; ++e)
    for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r)
      for (int64_t c = 0; c < n; ++c) {
        double ref = 0.0, mag = 0.0;
        for (int64_t i = 0; i < k; ++i) {
          const double s = static_cast<double>(sa[offsets[e] * kbs + (i / 128) * counts[e] + (r - offsets[e])]) *
                           sw[(e * nbs + c / 128) * kbs + i / 128];
          const double pr = static_cast<double>(a.values[r * k + i]) * b[e].values[c * k + i] * s;
          ref += pr;
          mag += std::fabs(pr);
        }
        const float got = d[r * n + c];
        ASSERT_TRUE(std::isfinite(got)) << "row " << r << " col " << c << " not written";
        ASSERT_LE(std::fabs(got - ref), 1e-5 * mag + 1e-30) << "row " << r << " col " << c << " got " << got
                                                            << " want " << ref;
      }
  const std::vector<float> again = run();
  ASSERT_EQ(0, std::memcmp(d.data(), again.data(), d.size() * 4)) << "two runs differ";
  // Without scales, or with k not a multiple of 128, the block problem is refused.
  g.b_scale = nullptr;
  EXPECT_FALSE(cuda::small_m_block_scales_ok(g));
  EXPECT_THROW(cuda::small_m_grouped_gemm(g, nullptr, true), Error);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SmallMGemmBlock,
                         ::testing::Combine(::testing::Values(int64_t{128}, int64_t{1280}),
                                            ::testing::Values(int64_t{2048}, int64_t{384}, int64_t{256})),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_k" +
                                  std::to_string(std::get<1>(info.param));
                         });

// The host rules that pick the fp8-block decode path and the few-rows range, at the shapes they
// were measured on (bench/results/2026-11-21-h100-fp8-block-small-m, -small-config-threshold).
TEST(SmallMRules, MeasuredChoices) {
  cuda::GroupedGemmArgs g;
  g.op = Operand::FP8;
  g.groups = 128;
  g.max_rows = 8;  // one token, top-8
  // fp8-block on the small-M kernels for experts of <= 8 MiB per GEMM.
  g.n = 1536, g.k = 2048;  // Qwen3-30B-A3B GEMM1: 3 MiB
  EXPECT_TRUE(cuda::small_m_block_pays(g));
  g.n = 7168, g.k = 256;  // DeepSeek-V3 TP8 GEMM2: 1.75 MiB
  EXPECT_TRUE(cuda::small_m_block_pays(g));
  g.n = 4096, g.k = 7168;  // DeepSeek-V3 TP1 GEMM1: 28 MiB
  EXPECT_FALSE(cuda::small_m_block_pays(g));
  // small_m_takes, the one question run_grouped_gemm and the decode fusions ask (the scale
  // pointers are only checked for presence here, never read).
  const float scale = 1.0f;
  g.a_scale = g.b_scale = &scale;
  EXPECT_TRUE(cuda::small_m_takes(g, cuda::GemmPath::SM90_TMA));
  EXPECT_FALSE(cuda::small_m_takes(g, cuda::GemmPath::SM90_FP8_BLOCK));  // too large to pay
  EXPECT_FALSE(cuda::small_m_takes(g, cuda::GemmPath::SIMT));
  g.n = 1536, g.k = 2048;
  EXPECT_TRUE(cuda::small_m_takes(g, cuda::GemmPath::SM90_FP8_BLOCK));
  g.b_scale = nullptr;  // without weight scales the small-M block kernel is not taken
  EXPECT_FALSE(cuda::small_m_takes(g, cuda::GemmPath::SM90_FP8_BLOCK));
  // The few-rows range (the stream GEMM's) up to 32 expected rows per active expert, 48 where
  // k >= 512 (here k = 2048), 64 there for 16-bit operands.
  g.groups = 8;
  g.max_rows = 256;  // Mixtral M = 128: 32 rows per expert
  EXPECT_TRUE(cuda::sm90_use_small_config(g));
  g.max_rows = 384;  // M = 192: 48 rows per expert
  EXPECT_TRUE(cuda::sm90_use_small_config(g));
  g.k = 256;
  EXPECT_FALSE(cuda::sm90_use_small_config(g));
  g.k = 2048;
  g.max_rows = 512;  // M = 256: 64 rows per expert
  EXPECT_FALSE(cuda::sm90_use_small_config(g));
  g.op = Operand::BF16;  // 16-bit operands: up to 64 rows (the stream GEMM's 128-row token tile)
  EXPECT_TRUE(cuda::sm90_use_small_config(g));
  g.max_rows = 520;
  EXPECT_FALSE(cuda::sm90_use_small_config(g));
  g.op = Operand::FP8;
  g.groups = 256;
  g.max_rows = 512;  // DeepSeek-V3 TP8 M = 64
  EXPECT_TRUE(cuda::sm90_use_small_config(g));
}

// Rows that are not a whole number of 16-byte chunks (fp8, k = 1288) are refused, not run.
TEST(SmallMGemmEdge, RefusesRowsNotMultipleOf16Bytes) {
  FMOE_REQUIRE_GPU();
  DeviceBuffer a_d(4096), b_d(1 << 20), d_d(4096), off_d(8);
  const int32_t offsets[2] = {0, 1};
  off_d.upload(offsets, sizeof(offsets));
  cuda::GroupedGemmArgs g;
  g.op = Operand::FP8;
  g.a = a_d.get();
  g.b = b_d.get();
  g.d = static_cast<float*>(d_d.get());
  g.n = 16;
  g.k = 1288;
  g.groups = 1;
  g.expert_offsets = static_cast<const int32_t*>(off_d.get());
  g.max_rows = 1;
  EXPECT_FALSE(cuda::small_m_gemm_applies(g));
  EXPECT_THROW(cuda::small_m_grouped_gemm(g, nullptr), Error);
  g.k = 1296;
  EXPECT_NO_THROW(cuda::small_m_grouped_gemm(g, nullptr));
  FMOE_CUDA(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace fusedmoe::gputest
