// The weight-streaming grouped GEMM (stream_gemm.cu) called directly, against a float64 host
// product of the same exactly representable operands (bf16 / fp16 / e4m3 values, fp32 D; fp8-block
// with fp32 block scales). What it must get right: experts with no rows (their weights are NaN
// bytes; only rows past n of a partial block may touch them, and those outputs are never stored),
// experts with more rows than one token batch (kTokTile = 64: 70 rows), row counts that are not a
// multiple of the 8-token MMA tile, n not a multiple of the 128-row weight block (100), several
// weight blocks per CTA (short k), k not a multiple of the 128-byte stage (the TMA's zeros past
// k), and a CUDA-graph replay giving the same bits. D is poisoned with NaN before each run.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/grouped_gemm.hpp"
#include "cuda/stream_gemm.hpp"
#include "fusedmoe/codecs.hpp"
#include "fusedmoe/error.hpp"
#include "gpu/gpu_test_util.hpp"
#include "gpu/operand_util.hpp"

namespace fusedmoe::gputest {
namespace {

using cuda::GemmPath;
using cuda::Operand;

const std::vector<int32_t> kCounts = {0, 3, 70, 0, 17, 1, 33, 8, 0};

struct Problem {
  Operand op;
  int64_t n, k;
  bool block;  // fp8-block scales
  std::vector<int32_t> counts;
  std::vector<int32_t> offsets;
  int64_t rows = 0;
  Operands a;
  std::vector<Operands> b;
  std::vector<float> sa, sw;  // block: [rows x k/128] per expert column-major; [groups, n/128, k/128]
  DeviceBuffer a_d, b_d, d_d, off_d, sa_d, sw_d;
  cuda::GroupedGemmArgs g;

  Problem(Operand op_, int64_t n_, int64_t k_, bool block_, std::vector<int32_t> counts_ = kCounts)
      : op(op_), n(n_), k(k_), block(block_), counts(std::move(counts_)) {
    const int groups = static_cast<int>(counts.size());
    offsets.assign(groups + 1, 0);
    for (int e = 0; e < groups; ++e) offsets[e + 1] = offsets[e] + counts[e];
    rows = offsets[groups];
    std::mt19937 rng(static_cast<uint32_t>(n * 31 + k * 7 + static_cast<int>(op) + (block ? 1000 : 0)));
    a = random_operand(op, rows * k, 1.0f, rng);
    const size_t elem = op == Operand::FP8 ? 1 : 2, expert_bytes = static_cast<size_t>(n * k) * elem;
    a_d = DeviceBuffer(a.bytes.size());
    b_d = DeviceBuffer(groups * expert_bytes);
    d_d = DeviceBuffer(rows * n * 4);
    off_d = DeviceBuffer(offsets.size() * 4);
    a_d.upload(a.bytes.data(), a.bytes.size());
    FMOE_CUDA(cudaMemset(b_d.get(), 0xFF, groups * expert_bytes));  // NaN in every operand type
    b.resize(groups);
    for (int e = 0; e < groups; ++e)
      if (counts[e] > 0) {
        b[e] = random_operand(op, n * k, block ? 1.0f : 0.05f, rng);
        FMOE_CUDA(cudaMemcpy(static_cast<char*>(b_d.get()) + e * expert_bytes, b[e].bytes.data(), expert_bytes,
                             cudaMemcpyHostToDevice));
      }
    off_d.upload(offsets.data(), offsets.size() * 4);
    g.op = op;
    g.a = a_d.get();
    g.b = b_d.get();
    g.d = d_d.get();
    g.n = n;
    g.k = k;
    g.groups = groups;
    g.expert_offsets = static_cast<const int32_t*>(off_d.get());
    g.max_rows = rows;
    if (block) {
      std::uniform_real_distribution<float> ud(0.25f, 4.0f);
      sa.resize(rows * (k / 128));
      sw.resize(groups * (n / 128) * (k / 128));
      for (auto& v : sa) v = ud(rng) * 1e-3f;
      for (auto& v : sw) v = ud(rng) * 1e-2f;
      sa_d = DeviceBuffer(sa.size() * 4);
      sw_d = DeviceBuffer(sw.size() * 4);
      sa_d.upload(sa.data(), sa.size() * 4);
      sw_d.upload(sw.data(), sw.size() * 4);
      g.a_scale = static_cast<const float*>(sa_d.get());
      g.b_scale = static_cast<const float*>(sw_d.get());
    }
  }
  GemmPath path() const { return block ? GemmPath::SM90_FP8_BLOCK : GemmPath::SM90_TMA; }

  std::vector<float> download() {
    std::vector<float> d(rows * n);
    d_d.download(d.data(), d.size() * 4);
    return d;
  }

  // Every routed element within tol x the magnitude sum of its exact products: 1e-5 (a few fp32
  // ulps) for the 16-bit types; 5e-4 for e4m3, whose tensor-core sums inside a 128-wide stage keep
  // a short fraction (the hardware's; CUTLASS's fp8 schedules see the same within a promotion
  // interval). Measured on these operands (H200, 2026-11-26): up to 1.2e-4 at k = 256, 3e-5 at
  // k = 2048; an error of the kernel (a wrong row, scale or k block) is of the order of 1.
  // Returns the worst error / magnitude seen.
  double check(const std::vector<float>& d) const {
    const double tol = op == Operand::FP8 ? 5e-4 : 1e-5;
    double worst = 0.0;
    const int64_t kbs = k / 128, nbs = n / 128;
    for (size_t e = 0; e < counts.size(); ++e)
      for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r)
        for (int64_t c = 0; c < n; ++c) {
          double ref = 0.0, mag = 0.0;
          for (int64_t i = 0; i < k; ++i) {
            double p = static_cast<double>(a.values[r * k + i]) * b[e].values[c * k + i];
            if (block)
              p *= static_cast<double>(sa[offsets[e] * kbs + (i / 128) * counts[e] + (r - offsets[e])]) *
                   sw[(e * nbs + c / 128) * kbs + i / 128];
            ref += p;
            mag += std::fabs(p);
          }
          const float got = d[r * n + c];
          EXPECT_TRUE(std::isfinite(got)) << "row " << r << " col " << c << " not written";
          if (!std::isfinite(got)) return 1.0;
          EXPECT_LE(std::fabs(got - ref), tol * mag + 1e-30)
              << "expert " << e << " row " << r << " col " << c << " got " << got << " want " << ref;
          if (std::fabs(got - ref) > tol * mag + 1e-30) return 1.0;
          worst = std::max(worst, std::fabs(got - ref) / (mag + 1e-30));
        }
    return worst;
  }
};

void run_and_check(Problem& p) {
  ASSERT_TRUE(cuda::stream_gemm_applies(p.g, p.path()));
  FMOE_CUDA(cudaMemset(p.d_d.get(), 0xFF, p.rows * p.n * 4));
  cuda::stream_grouped_gemm(p.g, p.path(), nullptr);
  FMOE_CUDA(cudaDeviceSynchronize());
  const std::vector<float> d = p.download();
  const double worst = p.check(d);
  if (::testing::Test::HasFailure()) return;
  ::testing::Test::RecordProperty("worst_relative_error", std::to_string(worst));
  // Replayed from a CUDA graph (the tensor maps travel as kernel parameters): the same bits.
  cudaStream_t s;
  FMOE_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  FMOE_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  cuda::stream_grouped_gemm(p.g, p.path(), s);
  FMOE_CUDA(cudaStreamEndCapture(s, &graph));
  FMOE_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  FMOE_CUDA(cudaMemset(p.d_d.get(), 0xFF, p.rows * p.n * 4));
  FMOE_CUDA(cudaGraphLaunch(exec, s));
  FMOE_CUDA(cudaStreamSynchronize(s));
  const std::vector<float> again = p.download();
  FMOE_CUDA(cudaGraphExecDestroy(exec));
  FMOE_CUDA(cudaGraphDestroy(graph));
  FMOE_CUDA(cudaStreamDestroy(s));
  ASSERT_EQ(0, std::memcmp(d.data(), again.data(), d.size() * 4)) << "graph replay differs";
  // As a grid of at most one CTA per SM (sm_count above the CTA count: one weight block per CTA,
  // the deep ring): the same bits.
  const int sm_count = p.g.sm_count;
  p.g.sm_count = 1 << 20;
  FMOE_CUDA(cudaMemset(p.d_d.get(), 0xFF, p.rows * p.n * 4));
  cuda::stream_grouped_gemm(p.g, p.path(), nullptr);
  FMOE_CUDA(cudaDeviceSynchronize());
  p.g.sm_count = sm_count;
  const std::vector<float> deep = p.download();
  ASSERT_EQ(0, std::memcmp(d.data(), deep.data(), d.size() * 4)) << "the small-grid launch differs";
  // With a bf16 D (GroupedGemmArgs::d_dtype, as the layer's GEMM2 when its output is bf16): every
  // element the fp32 D rounded to bf16 (RNE).
  p.g.d_dtype = DType::BF16;
  FMOE_CUDA(cudaMemset(p.d_d.get(), 0xFF, p.rows * p.n * 4));
  cuda::stream_grouped_gemm(p.g, p.path(), nullptr);
  FMOE_CUDA(cudaDeviceSynchronize());
  p.g.d_dtype = DType::F32;
  std::vector<uint16_t> d16(p.rows * p.n);
  p.d_d.download(d16.data(), d16.size() * 2);
  for (size_t i = 0; i < d16.size(); ++i)
    ASSERT_EQ(d16[i], float_to_bf16_bits(d[i])) << "bf16 D element " << i << " (fp32 D " << d[i] << ")";
  // With the 128-row token tile (an N = 128 wgmma; the expert of 70 rows in one batch instead of
  // two): the same bits - except fp8 without block scales, which sums the whole k in the wgmma's
  // registers there (no per-stage promotion): within the same tolerance of the float64 products.
  FMOE_CUDA(cudaMemset(p.d_d.get(), 0xFF, p.rows * p.n * 4));
  cuda::stream_grouped_gemm(p.g, p.path(), nullptr, cuda::StreamTile::WIDE);
  FMOE_CUDA(cudaDeviceSynchronize());
  const std::vector<float> wide = p.download();
  if (p.op == Operand::FP8 && !p.block) {
    const double wide_worst = p.check(wide);
    if (::testing::Test::HasFailure()) return;
    ::testing::Test::RecordProperty("wide_worst_relative_error", std::to_string(wide_worst));
  } else {
    ASSERT_EQ(0, std::memcmp(d.data(), wide.data(), d.size() * 4)) << "the wide token tile differs";
  }
}

class StreamGemm : public ::testing::TestWithParam<std::tuple<Operand, int64_t, int64_t>> {};

TEST_P(StreamGemm, MatchesFloat64Product) {
  FMOE_REQUIRE_GPU();
  const auto [op, n, k] = GetParam();
  Problem p(op, n, k, false);
  run_and_check(p);
}

// k = 2048: 16 (fp8) / 32 (16-bit) stages per block; k = 1296: the last stage partial (1296 and
// 2592 bytes); k = 256: short rows, several weight blocks per CTA. n = 100: one partial block;
// n = 1280: ten blocks.
INSTANTIATE_TEST_SUITE_P(Shapes, StreamGemm,
                         ::testing::Combine(::testing::Values(Operand::BF16, Operand::FP16, Operand::FP8),
                                            ::testing::Values(int64_t{100}, int64_t{1280}),
                                            ::testing::Values(int64_t{2048}, int64_t{1296}, int64_t{256})),
                         [](const auto& info) {
                           const Operand op = std::get<0>(info.param);
                           return std::string(op == Operand::BF16 ? "bf16" : op == Operand::FP16 ? "fp16" : "fp8") +
                                  "_n" + std::to_string(std::get<1>(info.param)) + "_k" +
                                  std::to_string(std::get<2>(info.param));
                         });

// The 256-row token tile (StreamTile::TALL, one CTA per SM, wgmmas in flight across stages): experts
// of 150, 3, 260 (a second batch of 4 rows), 97 and 200 rows take the wgmma widths 160, 64, 256 then
// 64, 128 and 224. 16-bit operands: the bits of the 64-row tile (exact products, fp32 sums in the
// same order); fp8 (whole-k sums in the wgmma's registers, as the wide tile): the float64 check.
// Graph replay and a bf16 D as the other tiles.
class StreamGemmTall : public ::testing::TestWithParam<Operand> {};

TEST_P(StreamGemmTall, MatchesNarrowTileOrFloat64) {
  FMOE_REQUIRE_GPU();
  Problem p(GetParam(), 256, 1296, false, {0, 150, 3, 260, 97, 0, 200});
  ASSERT_TRUE(cuda::stream_gemm_applies(p.g, p.path()));
  auto run = [&](cuda::StreamTile tile, cudaStream_t s = nullptr) {
    FMOE_CUDA(cudaMemset(p.d_d.get(), 0xFF, p.rows * p.n * 4));
    cuda::stream_grouped_gemm(p.g, p.path(), s, tile);
    FMOE_CUDA(cudaDeviceSynchronize());
    return p.download();
  };
  const std::vector<float> tall = run(cuda::StreamTile::TALL);
  const double worst = p.check(tall);
  if (::testing::Test::HasFailure()) return;
  ::testing::Test::RecordProperty("tall_worst_relative_error", std::to_string(worst));
  if (p.op != Operand::FP8) {
    const std::vector<float> narrow = run(cuda::StreamTile::NARROW);
    ASSERT_EQ(0, std::memcmp(narrow.data(), tall.data(), tall.size() * 4)) << "the tall token tile differs";
  }
  cudaStream_t s;
  FMOE_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  FMOE_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  cuda::stream_grouped_gemm(p.g, p.path(), s, cuda::StreamTile::TALL);
  FMOE_CUDA(cudaStreamEndCapture(s, &graph));
  FMOE_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  FMOE_CUDA(cudaMemset(p.d_d.get(), 0xFF, p.rows * p.n * 4));
  FMOE_CUDA(cudaGraphLaunch(exec, s));
  FMOE_CUDA(cudaStreamSynchronize(s));
  const std::vector<float> again = p.download();
  FMOE_CUDA(cudaGraphExecDestroy(exec));
  FMOE_CUDA(cudaGraphDestroy(graph));
  FMOE_CUDA(cudaStreamDestroy(s));
  ASSERT_EQ(0, std::memcmp(tall.data(), again.data(), tall.size() * 4)) << "graph replay differs";
  p.g.d_dtype = DType::BF16;
  FMOE_CUDA(cudaMemset(p.d_d.get(), 0xFF, p.rows * p.n * 4));
  cuda::stream_grouped_gemm(p.g, p.path(), nullptr, cuda::StreamTile::TALL);
  FMOE_CUDA(cudaDeviceSynchronize());
  std::vector<uint16_t> d16(p.rows * p.n);
  p.d_d.download(d16.data(), d16.size() * 2);
  for (size_t i = 0; i < d16.size(); ++i)
    ASSERT_EQ(d16[i], float_to_bf16_bits(tall[i])) << "bf16 D element " << i << " (fp32 D " << tall[i] << ")";
}

INSTANTIATE_TEST_SUITE_P(Operands, StreamGemmTall, ::testing::Values(Operand::BF16, Operand::FP16, Operand::FP8),
                         [](const auto& info) {
                           return std::string(info.param == Operand::BF16   ? "bf16"
                                              : info.param == Operand::FP16 ? "fp16"
                                                                            : "fp8");
                         });

class StreamGemmBlock : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(StreamGemmBlock, MatchesFloat64Product) {
  FMOE_REQUIRE_GPU();
  const auto [n, k] = GetParam();
  Problem p(Operand::FP8, n, k, true);
  run_and_check(p);
}

INSTANTIATE_TEST_SUITE_P(Shapes, StreamGemmBlock,
                         ::testing::Combine(::testing::Values(int64_t{128}, int64_t{1280}),
                                            ::testing::Values(int64_t{2048}, int64_t{256})),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_k" +
                                  std::to_string(std::get<1>(info.param));
                         });

// What it refuses (and throws on, naming the sizes) instead of reading misaligned or unscaled data;
// which calls run_grouped_gemm gives it.
TEST(StreamGemmRules, RefusesAndTakes) {
  cuda::GroupedGemmArgs g;
  alignas(16) static uint8_t dummy[64];
  const float scale = 1.0f;
  g.op = Operand::FP8;
  g.a = g.b = dummy;
  g.groups = 128;
  g.n = 1536;
  g.k = 2048;
  g.max_rows = 512;  // Qwen3-30B-A3B at 64 tokens: 4 rows per expert
  EXPECT_TRUE(cuda::stream_gemm_applies(g, GemmPath::SM90_TMA));
  EXPECT_TRUE(cuda::stream_gemm_takes(g, GemmPath::SM90_TMA));
  EXPECT_FALSE(cuda::stream_gemm_applies(g, GemmPath::SIMT));
  EXPECT_FALSE(cuda::stream_gemm_applies(g, GemmPath::SM90_FP8_BLOCK));  // no scales
  g.a_scale = g.b_scale = &scale;
  EXPECT_TRUE(cuda::stream_gemm_takes(g, GemmPath::SM90_FP8_BLOCK));
  g.max_rows = 8;  // one token: the small-M kernels
  EXPECT_FALSE(cuda::stream_gemm_takes(g, GemmPath::SM90_TMA));
  g.small_m_ok = false;  // where the layer's decode fusions do not pay: the stream GEMM
  EXPECT_FALSE(cuda::small_m_takes(g, GemmPath::SM90_TMA));
  EXPECT_TRUE(cuda::stream_gemm_takes(g, GemmPath::SM90_TMA));
  g.small_m_ok = true;
  g.max_rows = 128 * 32;  // 32 rows per expert: still the swap-AB range
  EXPECT_TRUE(cuda::stream_gemm_takes(g, GemmPath::SM90_TMA));
  g.max_rows = 128 * 48;  // 48 rows per expert: the stream GEMM where k >= 512 (kStreamLongKMinK)
  EXPECT_TRUE(cuda::stream_gemm_takes(g, GemmPath::SM90_TMA));
  g.k = 256;  // a short k (DeepSeek-V3 TP8's GEMM2): the large tile configs from 33 rows per expert
  EXPECT_FALSE(cuda::stream_gemm_takes(g, GemmPath::SM90_TMA));
  g.k = 2048;
  g.max_rows = 128 * 64;  // 64 rows per expert: fp8-block on the large blockwise configs
  EXPECT_FALSE(cuda::stream_gemm_takes(g, GemmPath::SM90_FP8_BLOCK));
  g.a_scale = g.b_scale = nullptr;  // fp8 without block scales: the 128-row token tile up to 64 rows
  EXPECT_TRUE(cuda::stream_gemm_takes(g, GemmPath::SM90_TMA));
  g.max_rows = 128 * 64 + 128;  // above 64 rows: the tall tile's range (below), not for these 2 KB rows
  EXPECT_FALSE(cuda::stream_gemm_takes(g, GemmPath::SM90_TMA));
  g.max_rows = 128 * 64;
  g.op = Operand::BF16;  // 16-bit operands: the stream GEMM (its 128-row token tile) up to 64 rows
  EXPECT_TRUE(cuda::stream_gemm_takes(g, GemmPath::SM90_TMA));
  g.max_rows = 128 * 64 + 128;
  EXPECT_FALSE(cuda::stream_gemm_takes(g, GemmPath::SM90_TMA));  // 4 KB rows: the large configs above 64
  {
    // Above 64 rows: the tall token tile for rows of >= 12 KB and n >= 4096 (Mixtral-8x7B's GEMM2:
    // k = 14336, n = 4096), up to 144 rows per expert; fp8-block never. The rule as shipped here
    // (FUSEDMOE_STREAM_TALL may move it in A/B runs).
    const cuda::StreamTallRule was = cuda::stream_tall_rule();
    cuda::set_stream_tall_rule({cuda::kStreamTallMinRowBytes, cuda::kStreamTallMinN});
    cuda::GroupedGemmArgs m = g;
    m.groups = 8;
    m.n = 4096;
    m.k = 14336;
    m.max_rows = 8 * 128;
    EXPECT_TRUE(cuda::stream_gemm_takes(m, GemmPath::SM90_TMA));
    m.max_rows = 8 * 144;
    EXPECT_TRUE(cuda::stream_gemm_takes(m, GemmPath::SM90_TMA));
    m.max_rows = 8 * 145;
    EXPECT_FALSE(cuda::stream_gemm_takes(m, GemmPath::SM90_TMA));
    m.max_rows = 8 * 128;
    m.op = Operand::FP8;  // fp8 (no block scales): 14 KB rows
    EXPECT_TRUE(cuda::stream_gemm_takes(m, GemmPath::SM90_TMA));
    m.k = 7168;  // 7 KB fp8 rows (DeepSeek-V3 TP1's GEMM1): the large configs
    EXPECT_FALSE(cuda::stream_gemm_takes(m, GemmPath::SM90_TMA));
    m.op = Operand::BF16;  // 14 KB bf16 rows, n = 4096: tall
    EXPECT_TRUE(cuda::stream_gemm_takes(m, GemmPath::SM90_TMA));
    m.n = 512;  // DeepSeek-V3 TP8's GEMM1: few weight blocks per expert, the large configs
    EXPECT_FALSE(cuda::stream_gemm_takes(m, GemmPath::SM90_TMA));
    cuda::set_stream_tall_rule({INT64_MAX, cuda::kStreamTallMinN});  // FUSEDMOE_STREAM_TALL=0
    m.n = 4096;
    EXPECT_FALSE(cuda::stream_gemm_takes(m, GemmPath::SM90_TMA));
    cuda::set_stream_tall_rule(was);
  }
  g.op = Operand::FP8;
  g.max_rows = 512;
  g.a_scale = g.b_scale = &scale;
  EXPECT_THROW(cuda::stream_grouped_gemm(g, GemmPath::SM90_FP8_BLOCK, nullptr, cuda::StreamTile::TALL), Error);
  g.a_scale = g.b_scale = nullptr;
  g.k = 1288;  // rows of 1288 bytes: not a 16-byte multiple
  EXPECT_FALSE(cuda::stream_gemm_applies(g, GemmPath::SM90_TMA));
  EXPECT_THROW(cuda::stream_grouped_gemm(g, GemmPath::SM90_TMA, nullptr), Error);
  g.k = 2048;
  g.a = dummy + 8;  // misaligned activations
  EXPECT_FALSE(cuda::stream_gemm_applies(g, GemmPath::SM90_TMA));
  g.a = dummy;
  g.d_dtype = DType::BF16;  // fp32 or bf16 D
  EXPECT_TRUE(cuda::stream_gemm_applies(g, GemmPath::SM90_TMA));
  g.d_dtype = DType::F16;
  EXPECT_FALSE(cuda::stream_gemm_applies(g, GemmPath::SM90_TMA));
  g.d_dtype = DType::F32;
  g.op = Operand::FP32;
  EXPECT_FALSE(cuda::stream_gemm_applies(g, GemmPath::SM90_TMA));
}

}  // namespace
}  // namespace fusedmoe::gputest
