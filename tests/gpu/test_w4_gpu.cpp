// The 4-bit formats on the GPU (w4_gemm.hpp) against the float64 CPU oracle: W4A8 int4 (signed
// and uint4b8), MXFP4 (bf16 and fp8 activations, linear and swizzled scales, the gpt-oss
// swigluoai in both layouts with biases), NVFP4 (bf16 and nvfp4 W4A4 activations). Each case
// runs both GEMM ways: few tokens (the mma kernel) and many tokens per expert (MXFP4 / NVFP4: the
// wgmma kernel, or decode to 16 bits + the SM90 GEMM where k % 64 != 0; W4A8: its fp8 wgmma kernel),
// plus a graph-captured replay that must write the same bytes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cuda/w4_gemm.hpp"
#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

struct W4Case {
  const char* name;
  Format format;
  ActDtype act_dtype;
  Activation act;
  bool interleaved, swizzled, uint4b8, bias, on_input;
};

const W4Case kCases[] = {
    {"w4a8_silu", Format::W4A8_INT4, ActDtype::BF16, Activation::SILU, false, false, false, false, false},
    {"w4a8_uint4b8_gelu_bias_oninput", Format::W4A8_INT4, ActDtype::BF16, Activation::GELU, false, false, true, true, true},
    {"w4a8_relu2", Format::W4A8_INT4, ActDtype::BF16, Activation::RELU2, false, false, false, false, false},
    {"mxfp4_bf16_silu", Format::MXFP4, ActDtype::BF16, Activation::SILU, false, false, false, false, false},
    {"mxfp4_bf16_swigluoai_interleaved_bias", Format::MXFP4, ActDtype::BF16, Activation::SWIGLUOAI, true, false, false, true, false},
    {"mxfp4_bf16_swigluoai_halves_bias_swizzled", Format::MXFP4, ActDtype::BF16, Activation::SWIGLUOAI, false, true, false, true, false},
    {"mxfp4_fp8_swigluoai_interleaved_bias", Format::MXFP4, ActDtype::FP8, Activation::SWIGLUOAI, true, false, false, true, false},
    {"mxfp4_fp8_gelu_tanh_swizzled_oninput", Format::MXFP4, ActDtype::FP8, Activation::GELU_TANH, false, true, false, false, true},
    {"nvfp4_bf16_silu", Format::NVFP4, ActDtype::BF16, Activation::SILU, false, false, false, false, false},
    {"nvfp4_bf16_silu_swizzled_bias", Format::NVFP4, ActDtype::BF16, Activation::SILU, false, true, false, true, false},
    {"nvfp4_w4a4_silu", Format::NVFP4, ActDtype::NVFP4, Activation::SILU, false, false, false, false, false},
    {"nvfp4_w4a4_swigluoai_swizzled_bias_oninput", Format::NVFP4, ActDtype::NVFP4, Activation::SWIGLUOAI, false, true, false, true, true},
};

Case make_w4_case(const W4Case& w, int64_t M, int64_t K, int64_t N, int64_t E, int64_t topk, uint64_t seed) {
  Case c;
  c.format = w.format;
  c.act_dtype = w.act_dtype;
  c.act = w.act;
  c.interleaved = w.interleaved;
  c.swizzled = w.swizzled;
  c.uint4b8 = w.uint4b8;
  c.bias = w.bias;
  c.on_input = w.on_input;
  c.order = w.act == Activation::SWIGLUOAI ? GateUpOrder::GATE_UP : (seed % 2 ? GateUpOrder::UP_GATE : GateUpOrder::GATE_UP);
  c.M = M;
  c.K = K;
  c.N = N;
  c.E = E;
  c.topk = topk;
  c.seed = seed;
  c.w_gain = w.act == Activation::SWIGLUOAI ? 6.0f : 1.0f;
  return c;
}

class W4Gpu : public ::testing::TestWithParam<int> {};

// Few tokens per expert: the mma kernel (1 and 5 tokens, 37 tokens over 8 experts, and one
// expert holding 40 rows: several token passes).
TEST_P(W4Gpu, DecodeSizesMatchOracle) {
  FMOE_REQUIRE_GPU();
  const W4Case& w = kCases[GetParam()];
  for (int64_t M : {1, 5, 37}) {
    const Case c = make_w4_case(w, M, 256, 128, 8, 2, 100 + M + 1000 * GetParam());
    check_against_oracle(c, make_layer(c), make_inputs(c, c.E));
  }
  const Case one = make_w4_case(w, 40, 256, 128, 8, 1, 7 + 1000 * GetParam());
  check_against_oracle(one, make_layer(one), make_inputs(one, 1));  // all rows on expert 0
  // k % 256 = 128 in both GEMMs (GEMM1 k = 384: one full stage, then a last stage of one 128-k
  // sub-chunk; GEMM2 k = 128: only that stage) - the mma kernel's MXFP4 tail instance (w4_gemm.cu).
  const Case tail = make_w4_case(w, 5, 384, 128, 8, 2, 9 + 1000 * GetParam());
  check_against_oracle(tail, make_layer(tail), make_inputs(tail, tail.E));
  // Long k, k % 256 == 0 (GEMM1 k = 4352: 17 stages, an odd count for the two-buffer ring; GEMM2 k = 512): the e2m1
  // 8-token tile without predicated activation loads (kFullK, w4_gemm.cu).
  const Case full = make_w4_case(w, 5, 4352, 512, 8, 2, 13 + 1000 * GetParam());
  check_against_oracle(full, make_layer(full), make_inputs(full, full.E));
  // k % 128 = 32 (GEMM1 k = 288) and k = 96 (GEMM2): 128-k sub-chunks only some lanes of which lie inside k (in
  // MXFP4's 16-token tile - 37 tokens x top-2 over 8 experts - the activation loads past k read a zero page). W4A8
  // needs k % 128 == 0 (its scale groups).
  if (w.format != Format::W4A8_INT4) {
    const Case part = make_w4_case(w, 37, 288, 96, 8, 2, 11 + 1000 * GetParam());
    check_against_oracle(part, make_layer(part), make_inputs(part, part.E));
  }
  // NVFP4's GEMM2 with k split in two (w4_mma_split_pays: few warps - 2 tokens x top-2, hidden 256 - and k = N >= 1024):
  // the second half's sums in h's buffer, added by the finalize; N = 1152 (a last stage of one 128-k sub-chunk, in the
  // second half) and 1024. The other formats keep one k range (the same shapes, as more long-k GEMM2 cases).
  for (int64_t N : {1152, 1024}) {
    const Case split = make_w4_case(w, 2, 256, N, 8, 2, 17 + N + 1000 * GetParam());
    cuda::W4Weights w2;
    w2.format = w.format;
    w2.n = split.K;
    w2.k = N;
    const char* off = std::getenv("FUSEDMOE_W4_SPLIT");
    const bool expect = w.format == Format::NVFP4 && !(off && std::string(off) == "0") && cuda::w4_mma_lean(w.format);
    EXPECT_EQ(cuda::w4_mma_split_pays(w2, 8, split.M * split.topk, device_sm_count()), expect) << "N " << N;
    check_against_oracle(split, make_layer(split), make_inputs(split, split.E));
  }
  // W4A8 on a grid of many rounds (N = 1280: GEMM1's 2560 rows x 128 experts with ~4 rows each, 5120 blocks; added for
  // the stage-ahead instance of 2026-11-29, since replaced by the shared-memory activations, w4_gemm.cu kSx).
  if (w.format == Format::W4A8_INT4) {
    const Case wide = make_w4_case(w, 64, 256, 1280, 128, 8, 19 + 1000 * GetParam());
    check_against_oracle(wide, make_layer(wide), make_inputs(wide, wide.E));
  }
  // Many experts (64 tokens x top-8 over 300: ~245 of them hit, 1-2 rows each): the mma kernel's blocks look their
  // expert and its rows up 128 experts per step (active_expert_rows), so most find it in a second or third step.
  const Case many = make_w4_case(w, 64, 256, 128, 300, 8, 15 + 1000 * GetParam());
  check_against_oracle(many, make_layer(many), make_inputs(many, many.E));
}

// Many tokens per expert: the large-batch way (MXFP4 / NVFP4: the wgmma kernel, k = 256 and 128;
// W4A8: its fp8 wgmma kernel). 150 rows per expert pass both thresholds (16, 48).
TEST_P(W4Gpu, LargeBatchMatchesOracle) {
  FMOE_REQUIRE_GPU();
  const W4Case& w = kCases[GetParam()];
  const Case c = make_w4_case(w, 300, 256, 128, 4, 2, 55 + 1000 * GetParam());
  ASSERT_TRUE(cuda::w4_use_dequant(c.M * c.topk, static_cast<int>(c.E)));  // the way this test is for
  check_against_oracle(c, make_layer(c), make_inputs(c, c.E));
}

// Between decode and the large-batch way: 12 and 24 rows per expert take the mma kernel's 16- and 32-token tiles (their
// activations through shared memory), below the wgmma way's threshold (26 rows W4A8, 30 MXFP4 / NVFP4).
TEST_P(W4Gpu, MidBatchMatchesOracle) {
  FMOE_REQUIRE_GPU();
  const W4Case& w = kCases[GetParam()];
  for (int64_t M : {24, 48}) {
    const Case c = make_w4_case(w, M, 256, 128, 4, 2, 66 + M + 1000 * GetParam());
    ASSERT_FALSE(cuda::w4_use_dequant(c.M * c.topk, static_cast<int>(c.E), cuda::w4_wgmma_min_rows_per_expert(w.format)))
        << "M " << M << ": the mma kernel's way is what this test is for";
    check_against_oracle(c, make_layer(c), make_inputs(c, c.E));
  }
}

// Sizes that are multiples of 32 but not of 128 (gpt-oss: 2880), and a weight row count that is
// not a multiple of the 16-row MMA tile; both ways.
TEST_P(W4Gpu, RaggedSizesMatchOracle) {
  FMOE_REQUIRE_GPU();
  const W4Case& w = kCases[GetParam()];
  const int64_t K = w.format == Format::W4A8_INT4 ? 384 : 224, N = w.format == Format::W4A8_INT4 ? 128 : 96 + 8 * 4;
  for (int64_t M : {3, 250}) {
    const Case c = make_w4_case(w, M, K, N, 4, 2, 77 + M + 1000 * GetParam());
    check_against_oracle(c, make_layer(c), make_inputs(c, c.E));
  }
}

std::string w4_name(const ::testing::TestParamInfo<int>& info) { return kCases[info.param].name; }
INSTANTIATE_TEST_SUITE_P(Formats, W4Gpu, ::testing::Range(0, static_cast<int>(sizeof(kCases) / sizeof(kCases[0]))), w4_name);

TEST(W4GpuEdge, SizesTheKernelsCannotTakeAreRefused) {
  FMOE_REQUIRE_GPU();
  // nvfp4 with K a multiple of 16 but not of 32.
  expect_refused(make_w4_case(kCases[8], 4, 48, 64, 4, 2, 3), {"multiples of 32"});
}

// The kernels' alignment needs, checked on the host (no GPU memory involved): 16-byte weights,
// 2-byte nvfp4 / w4a8 scales (one 16-bit load per row and sub-chunk); mxfp4's 1-byte scales any.
TEST(W4GpuEdge, MisalignedPointersAreRefused) {
  alignas(16) static uint8_t buf[64] = {};
  cuda::W4Weights w;
  w.n = 64;
  w.k = 128;
  w.w = buf;
  const char* why = "";
  for (Format f : {Format::NVFP4, Format::W4A8_INT4, Format::MXFP4}) {
    w.format = f;
    w.scale = buf + 2;
    EXPECT_TRUE(cuda::w4_shape_ok(w, &why)) << why;
    w.scale = buf + 1;
    EXPECT_EQ(cuda::w4_shape_ok(w, &why), f == Format::MXFP4) << why;
    if (f != Format::MXFP4) EXPECT_NE(std::string(why).find("2-byte aligned"), std::string::npos) << why;
  }
  w.format = Format::MXFP4;
  w.w = buf + 8;
  EXPECT_FALSE(cuda::w4_shape_ok(w, &why));
  EXPECT_NE(std::string(why).find("16-byte aligned"), std::string::npos) << why;
}

// W4A8 group scales outside fp16's range (a 16-bit decode would multiply int4 by the scale in
// fp16: subnormal below 2^-14, inf above 8188); the mma and wgmma kernels apply them in fp32.
TEST(W4GpuEdge, W4a8ScalesOutsideFp16Range) {
  FMOE_REQUIRE_GPU();
  for (float gain : {1e-4f, 1e6f}) {
    for (int64_t M : {5, 300}) {
      Case c = make_w4_case(kCases[0], M, 256, 128, 4, 2, 13 + M);
      c.w_gain = gain;
      check_against_oracle(c, make_layer(c), make_inputs(c, c.E));
    }
  }
}

// expert_map with -1 entries and ids out of range on a 4-bit layer (both ways; mxfp4 and W4A8,
// whose dequant ways differ).
TEST(W4GpuEdge, ExpertMapAndOutOfRangeIds) {
  FMOE_REQUIRE_GPU();
  for (int which : {3, 0}) {
    for (int64_t M : {6, 300}) {
      Case c = make_w4_case(kCases[which], M, 256, 128, 4, 2, 91 + M);
      const LayerFile lf = make_layer(c);
      Inputs in = make_inputs(c, 8);  // ids in [0, 8): global experts
      in.has_map = true;
      in.expert_map = HostTensor(DType::I32, {8});
      const int32_t map[8] = {0, -1, 1, -1, 2, 3, -1, -1};
      for (int i = 0; i < 8; ++i) in.expert_map.data<int32_t>()[i] = map[i];
      in.ids.data<int32_t>()[0] = 1000;  // out of range: contributes nothing
      check_against_oracle(c, lf, in);
    }
  }
}

}  // namespace
}  // namespace fusedmoe::gputest
