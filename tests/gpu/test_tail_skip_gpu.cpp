// The cooperative GEMMs' last M tiles (sm90_tail_skip_mainloop.cuh): a consumer warpgroup whose 64
// rows all lie past the expert's end skips its MMAs, and the fused GEMM1 + activation's warps
// with no row leave the epilogue early. Routing is set by hand so that the experts' last tiles hold
// 1, 64 (the second warpgroup's first row just past the end), 65 (one row for it), 127 and 128
// rows, an expert has a single 64-row tile, another one row and one none; the shapes give each
// GEMM more tiles than an H100 has SMs, so CTAs run several tiles and the per-stage slots are
// reused in both phase parities. Every output against the float64 oracle, graph replay bitwise
// equal (check_against_oracle), for bf16 and static fp8-tensor, the fused GEMM1 + activation
// checked to have run; and bitwise equal to the same layer with the skip off (set_tail_skip).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "cuda/grouped_gemm.hpp"
#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

// Rows per expert: last tiles of 1, 64, 65, 127 rows; a lone 64-row tile; 1 row; none; 128 + 128 + 64.
const int64_t kRowsPerExpert[] = {129, 192, 193, 255, 64, 1, 0, 320, 256};

Inputs hand_routed_inputs(const Case& c) {
  Inputs in = make_inputs(c, c.E);
  std::vector<int32_t> ids;
  for (int64_t e = 0; e < c.E; ++e) ids.insert(ids.end(), static_cast<size_t>(kRowsPerExpert[e]), static_cast<int32_t>(e));
  std::mt19937_64 rng(c.seed);
  std::shuffle(ids.begin(), ids.end(), rng);  // experts interleaved over the tokens
  EXPECT_EQ(static_cast<int64_t>(ids.size()), c.M);
  std::copy(ids.begin(), ids.end(), in.ids.data<int32_t>());
  return in;
}

Case tail_case(Format format, int64_t K, int64_t N, uint64_t seed) {
  Case c;
  c.format = format;
  c.fp8_static = format == Format::FP8_TENSOR;
  c.act = Activation::SILU;
  c.hidden_dtype = DType::BF16;
  c.topk = 1;
  c.E = static_cast<int64_t>(sizeof(kRowsPerExpert) / sizeof(kRowsPerExpert[0]));
  c.M = std::accumulate(std::begin(kRowsPerExpert), std::end(kRowsPerExpert), int64_t{0});
  c.K = K;
  c.N = N;
  c.seed = seed;
  return c;
}

class TailSkipGpu : public ::testing::TestWithParam<int> {};

TEST_P(TailSkipGpu, LastTilesMatchOracle) {
  FMOE_REQUIRE_GPU();
  const Format format = GetParam() == 0 ? Format::BF16 : Format::FP8_TENSOR;
  // GEMM1 with many N tiles (2N = 3072: 12 fused 256-column tiles per M tile, 15 M tiles), then
  // GEMM2 with many (K = 3072 outputs: 12 tiles of 256 per M tile).
  for (const auto& [K, N] : {std::pair<int64_t, int64_t>{512, 1536}, std::pair<int64_t, int64_t>{3072, 128}}) {
    const Case c = tail_case(format, K, N, 9100u + static_cast<uint64_t>(K + N + GetParam()));
    const LayerFile lf = make_layer(c);
    const Inputs in = hand_routed_inputs(c);
    expect_fused_gemm1(cuda::FusedGemm1::BF16_OR_FP8_TENSOR, true, [&] { check_against_oracle(c, lf, in); });
    // The skipped MMAs' rows are never stored: the same bits with every warpgroup's MMAs run.
    DeviceLayer dl(lf);
    Layer layer(lf.config, dl.weights);
    const HostTensor skipped = run_gpu(layer, in);
    cuda::set_tail_skip(false);
    const HostTensor full = run_gpu(layer, in);
    cuda::set_tail_skip(true);
    EXPECT_TRUE(test::bitwise_equal(skipped, full)) << describe(c) << ": tail skip changed the output";
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, TailSkipGpu, ::testing::Range(0, 2),
                         [](const ::testing::TestParamInfo<int>& i) { return i.param == 0 ? "bf16" : "fp8_tensor_static"; });

}  // namespace
}  // namespace fusedmoe::gputest
