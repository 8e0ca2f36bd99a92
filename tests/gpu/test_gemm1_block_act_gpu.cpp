// fp8-block GEMM1 with the activation in its epilogue (sm90_grouped_gemm_fp8_blockwise_act.cu):
// large batches (more than 48 rows per expert), gate / up rows in halves, the
// bf16 activation rows then quantised 1 x 128 (quantise_bf16_block_kernel).
// - against the float64 oracle for every gated activation, both gate / up orders, both row
//   layouts, biases, router weight on input, fp32 and power-of-two (ue8m0) scales, rows per
//   expert not multiples of the 128-row tile, N of one and of several 128-wide groups, with graph
//   replay bitwise equal to the first run (check_against_oracle);
// - weight block scales made distinct powers of two per block, so that a mix-up of the halves'
//   scales or of the tile-ordered scale copy shows against the oracle;
// - interleaved rows (unfused: sm90_gemm1_block_act_applies) against the oracle;
// - the few-rows range on the stream GEMM (stream_gemm1_block_activation) against the oracle;
// - the bound on how far apart the halves may lie, by expected rows per expert (Gemm1BlockActRules).
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "cuda/grouped_gemm.hpp"
#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

const Activation kActs[] = {Activation::SILU, Activation::GELU, Activation::GELU_TANH, Activation::SWIGLUOAI};

// E = 4 experts, M x topk slots: 250-375 rows per expert (the large blockwise instance, several
// 128-row M tiles, the last one partial). N = 384: three quantisation groups, six 128-column
// GEMM1 tiles.
Case block_act_case(Activation act, int variant, bool halves) {
  Case c;
  c.format = Format::FP8_BLOCK;
  c.act = act;
  c.interleaved = !halves;
  c.hidden_dtype = DType::BF16;
  c.order = variant == 0 ? GateUpOrder::GATE_UP : GateUpOrder::UP_GATE;
  c.bias = variant == 1;
  c.on_input = variant == 1;
  c.topk = variant == 0 ? 2 : 3;
  c.M = 500;
  c.K = 512;
  c.N = 384;
  c.E = 4;
  c.seed = 9100u + 10u * static_cast<uint64_t>(act) + variant + (halves ? 5u : 0u);
  c.w_gain = act == Activation::SWIGLUOAI ? 6.0f : 1.0f;
  return c;
}

// The layer's w13 block scales multiplied by distinct powers of two per (128-row block, k block),
// so that a gate block read in place of an up block, or one k block's scale in place of another's,
// moves the result far past the tolerance (random weights alone give every block nearly the same
// scale). Exact in fp32 and ue8m0 alike.
void distinct_block_scales(LayerFile& lf) {
  const int64_t E = lf.num_experts, N = lf.inter, KB = (lf.hidden + 127) / 128, NB = 2 * N / 128;
  float* sp = reinterpret_cast<float*>(lf.tensors.at("w13_weight_scale").bytes.data());
  for (int64_t e = 0; e < E; ++e)
    for (int64_t b = 0; b < NB; ++b)
      for (int64_t j = 0; j < KB; ++j) sp[(e * NB + b) * KB + j] *= static_cast<float>(1 << ((3 * b + j) % 5));
}

class Gemm1BlockActGpu : public ::testing::TestWithParam<std::tuple<int, int, bool, bool>> {};

TEST_P(Gemm1BlockActGpu, MatchesOracle) {
  FMOE_REQUIRE_GPU();
  const auto [ai, variant, halves, ue8m0] = GetParam();
  const Case c = block_act_case(kActs[ai], variant, halves);
  LayerFile lf = make_layer(c);
  lf.config.fp8_block_ue8m0 = ue8m0;
  SCOPED_TRACE(ue8m0 ? "ue8m0" : "fp32 scales");
  // Halves rows take the fused path; interleaved ones stay unfused (sm90_gemm1_block_act_applies).
  expect_fused_gemm1(cuda::FusedGemm1::FP8_BLOCK, halves, [&] { check_against_oracle(c, lf, make_inputs(c, c.E)); });
}

std::string block_act_name(const ::testing::TestParamInfo<std::tuple<int, int, bool, bool>>& info) {
  const auto [ai, variant, halves, ue8m0] = info.param;
  return std::string(activation_name(kActs[ai])) + (variant == 0 ? "_gate_up" : "_up_gate_bias_oninput") +
         (halves ? "_halves" : "_interleaved") + (ue8m0 ? "_ue8m0" : "");
}

INSTANTIATE_TEST_SUITE_P(Activations, Gemm1BlockActGpu,
                         ::testing::Combine(::testing::Range(0, 4), ::testing::Range(0, 2), ::testing::Values(true),
                                            ::testing::Bool()),
                         block_act_name);

// One 128-wide group (N = 128: a halves tile holds rows 0..63 of each half, the next 64..127).
// The CUTLASS fused path's bound on how far apart the halves may lie (sm90_gemm1_block_act_applies):
// Mixtral-8x7B's 59 MB fuse from 768 expected rows per expert (4096 tokens: 1024), not at 512;
// halves within 32 MB (Qwen3-30B-A3B's 1.5 MB) at any large-batch row count.
TEST(Gemm1BlockActRules, FarHalvesFromManyRows) {
  using cuda::ActivationParams;
  using cuda::Fp8Quant;
  using cuda::GemmPath;
  using cuda::Operand;
  FMOE_REQUIRE_GPU();
  if (!cuda::sm90_fp8_blockwise_built()) GTEST_SKIP() << "fp8 blockwise instances not built";
  cuda::GroupedGemmArgs g;
  alignas(16) static uint8_t dummy[64];
  alignas(16) static float scales[4];
  g.op = Operand::FP8;
  g.a = g.b = dummy;
  g.a_scale = g.b_scale = g.b_scale_tiles = scales;
  g.groups = 8;
  g.n = 2 * 14336;
  g.k = 4096;
  g.small_m_ok = false;
  ActivationParams p;
  p.R = 2 * 14336;
  p.N = 14336;
  p.op = Operand::FP8;
  p.quant = Fp8Quant::BLOCK;
  p.act_dtype = DType::BF16;
  g.max_rows = 8 * 1024;  // 4096 tokens, top-2
  EXPECT_TRUE(cuda::sm90_gemm1_block_act_applies(g, GemmPath::SM90_FP8_BLOCK, p));
  g.max_rows = 8 * 768;
  EXPECT_TRUE(cuda::sm90_gemm1_block_act_applies(g, GemmPath::SM90_FP8_BLOCK, p));
  g.max_rows = 8 * 767;
  EXPECT_FALSE(cuda::sm90_gemm1_block_act_applies(g, GemmPath::SM90_FP8_BLOCK, p));
  g.max_rows = 8 * 512;  // 2048 tokens
  EXPECT_FALSE(cuda::sm90_gemm1_block_act_applies(g, GemmPath::SM90_FP8_BLOCK, p));
  g.groups = 128;  // Qwen3-30B-A3B: halves 768 x 2048 bytes apart
  g.n = p.R = 1536;
  p.N = 768;
  g.k = 2048;
  g.max_rows = 128 * 256;  // 4096 tokens, top-8
  EXPECT_TRUE(cuda::sm90_gemm1_block_act_applies(g, GemmPath::SM90_FP8_BLOCK, p));
}

TEST(Gemm1BlockActPathsGpu, OneGroupMatchesOracle) {
  FMOE_REQUIRE_GPU();
  for (bool halves : {false, true}) {
    Case c = block_act_case(Activation::SILU, 0, halves);
    c.N = 128;
    c.K = 1024;
    c.seed += 31;
    expect_fused_gemm1(cuda::FusedGemm1::FP8_BLOCK, halves, [&] { check_case(c); });
  }
}

// The weight scales of the tile order, distinct per block (distinct_block_scales).
TEST(Gemm1BlockActPathsGpu, DistinctBlockScalesMatchOracle) {
  FMOE_REQUIRE_GPU();
  for (Activation act : {Activation::SILU, Activation::SWIGLUOAI})
    for (int variant = 0; variant < 2; ++variant)
      for (bool ue8m0 : {false, true}) {
        Case c = block_act_case(act, variant, /*halves=*/true);
        c.seed += 57;
        LayerFile lf = make_layer(c);
        lf.config.fp8_block_ue8m0 = ue8m0;
        distinct_block_scales(lf);
        SCOPED_TRACE(ue8m0 ? "ue8m0" : "fp32 scales");
        expect_fused_gemm1(cuda::FusedGemm1::FP8_BLOCK, true, [&] { check_against_oracle(c, lf, make_inputs(c, c.E)); });
      }
}

// Interleaved rows and N past the fused path's rule stay on GEMM1 + the activation kernel.
TEST(Gemm1BlockActPathsGpu, UnfusedLayoutsMatchOracle) {
  FMOE_REQUIRE_GPU();
  expect_fused_gemm1(cuda::FusedGemm1::FP8_BLOCK, false, [] { check_case(block_act_case(Activation::GELU, 1, /*halves=*/false)); });
}

// The few-rows range (at most 48 rows per expert, k >= 512: the stream GEMM) fuses too, on the
// stream GEMM (stream_gemm1_block_activation): 8 experts, 200 slots (~25 rows each), halves; the
// weight block scales distinct per block (distinct_block_scales). Interleaved rows stay unfused.
TEST(Gemm1BlockActPathsGpu, StreamRangeMatchesOracle) {
  FMOE_REQUIRE_GPU();
  for (Activation act : {Activation::SILU, Activation::SWIGLUOAI})
    for (int variant = 0; variant < 2; ++variant)
      for (bool ue8m0 : {false, true}) {
        Case c = block_act_case(act, variant, /*halves=*/true);
        c.M = 100;
        c.topk = 2;
        c.E = 8;
        c.seed += 211;
        LayerFile lf = make_layer(c);
        lf.config.fp8_block_ue8m0 = ue8m0;
        distinct_block_scales(lf);
        SCOPED_TRACE(std::string(activation_name(act)) + (variant ? " up_gate bias on_input" : " gate_up") +
                     (ue8m0 ? " ue8m0" : " fp32 scales"));
        expect_fused_gemm1(cuda::FusedGemm1::FP8_BLOCK, true, [&] { check_against_oracle(c, lf, make_inputs(c, c.E)); });
      }
  Case c = block_act_case(Activation::GELU, 1, /*halves=*/false);
  c.M = 100;
  c.topk = 2;
  c.E = 8;
  expect_fused_gemm1(cuda::FusedGemm1::FP8_BLOCK, false, [&] { check_case(c); });
}

}  // namespace
}  // namespace fusedmoe::gputest
