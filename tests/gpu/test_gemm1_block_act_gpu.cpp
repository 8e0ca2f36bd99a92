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
// - the few-rows range on the stream GEMM (stream_gemm1_block_activation) against the oracle.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

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
