// GEMM1 + activation with its A rows gathered by token inside the mainloop (CUTLASS:
// sm90_gather_a_mainloop.cuh; the stream GEMM's producer warp in the few-rows range): bf16 from
// hidden_states, static fp8-tensor and fp8-channel from one row of codes per token (fp8-channel's
// per-token scale written to each slot's row). The layer's output against the float64 oracle (with
// graph replay), bitwise equal to the same layer with the gather switched off (the permuted operand
// and the TMA tile loads: the same operand values land in the same shared-memory places), and the
// gathered kernel is the one that ran (its launch counter). Rows per expert are not multiples of
// the 128-row tile, so tiles hold rows past their expert's end (zero-filled, never stored); ids out
// of range and an expert map with unmapped experts leave slots without rows.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>

#include "cuda/grouped_gemm.hpp"
#include "cuda/stream_gemm.hpp"
#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

// Restores the switch however the test ends.
struct GatherSwitch {
  explicit GatherSwitch(cuda::Gemm1Gather mode) : was(cuda::gemm1_gather_mode()) { cuda::set_gemm1_gather_mode(mode); }
  ~GatherSwitch() { cuda::set_gemm1_gather_mode(was); }
  cuda::Gemm1Gather was;
};

Case gather_case(Format format, bool halves, int variant) {
  Case c;
  c.format = format;
  c.fp8_static = format == Format::FP8_TENSOR;
  c.act = variant == 1 ? Activation::SWIGLUOAI : Activation::SILU;
  c.w_gain = variant == 1 ? 6.0f : 1.0f;
  c.interleaved = !halves;
  c.bias = variant == 1;
  c.order = variant == 0 ? GateUpOrder::GATE_UP : GateUpOrder::UP_GATE;
  c.hidden_dtype = DType::BF16;
  c.topk = variant == 0 ? 2 : 3;
  c.M = variant == 0 ? 700 : 431;  // 350 / 259 rows per expert: partial last tiles
  c.K = 512;
  c.N = halves ? 320 : 200;
  c.E = variant == 0 ? 4 : 5;
  c.seed = 7100u + (format == Format::FP8_TENSOR ? 50u : format == Format::FP8_CHANNEL ? 100u : 0u) +
           (halves ? 5u : 0u) + static_cast<uint64_t>(variant);
  return c;
}

void check_gathered(const Case& c, int64_t num_ids, bool with_map) {
  SCOPED_TRACE(describe(c));
  const LayerFile lf = make_layer(c);
  Inputs in = make_inputs(c, num_ids < 0 ? c.E : num_ids);
  if (with_map) {
    // Global ids 0..2E-1; the odd ones unmapped (-1), the even ones onto the E local experts.
    in = make_inputs(c, 2 * c.E);
    in.has_map = true;
    in.expert_map = HostTensor(DType::I32, {2 * c.E});
    for (int64_t g = 0; g < 2 * c.E; ++g) in.expert_map.data<int32_t>()[g] = g % 2 ? -1 : static_cast<int32_t>(g / 2);
  }
  const DeviceLayer dl(lf);
  const Layer layer(lf.config, dl.weights);

  HostTensor gathered, plain;
  {
    GatherSwitch on(cuda::Gemm1Gather::ON);
    const int64_t before = cuda::gathered_gemm1_launches();
    check_against_oracle(c, lf, in);  // first run, graph replay bitwise equal
    gathered = run_gpu(layer, in);
    EXPECT_GT(cuda::gathered_gemm1_launches(), before) << "the gathered GEMM1 did not run";
  }
  {
    GatherSwitch off(cuda::Gemm1Gather::OFF);
    const int64_t before = cuda::gathered_gemm1_launches();
    plain = run_gpu(layer, in);
    EXPECT_EQ(cuda::gathered_gemm1_launches(), before) << "the gathered GEMM1 ran while switched off";
  }
  EXPECT_TRUE(test::bitwise_equal(gathered, plain)) << "gathered GEMM1 differs from the permuted operand's";
}

TEST(Gemm1GatherGpu, MatchesOracleAndPermutedOperand) {
  FMOE_REQUIRE_GPU();
  for (Format f : {Format::BF16, Format::FP8_TENSOR, Format::FP8_CHANNEL})
    for (bool halves : {false, true})
      for (int variant : {0, 1}) check_gathered(gather_case(f, halves, variant), -1, false);
}

// The few-rows range (at most 32-64 rows per expert): the stream GEMM's GEMM1 + activation
// gathers through its producer warp's cp.async copies; 100 tokens, top-2 of 8 experts (25 rows
// per expert on average, partial token boxes), and top-3 of 5 with 60 rows (the wide token tile).
TEST(Gemm1GatherGpu, StreamGemmFewRows) {
  FMOE_REQUIRE_GPU();
  for (Format f : {Format::BF16, Format::FP8_TENSOR, Format::FP8_CHANNEL})
    for (int variant : {0, 1}) {
      Case c = gather_case(f, variant == 0, variant);
      c.M = 100;
      c.E = variant == 0 ? 8 : 5;
      c.topk = variant == 0 ? 2 : 3;
      check_gathered(c, -1, false);
    }
}

// The tall token tile (65-144 expected rows per expert; its rule's row-byte and n bounds lowered
// here to take the case's shapes): 500 tokens, top-2 of 8 experts (125 rows per expert) and 360
// tokens, top-3 of 8 (135), wgmma widths 96-160. Gathered or not, against the oracle and bit for
// bit. The GEMM1 shape is checked to be the stream GEMM's above the wide tile's 64 rows, so that
// a later change of the rule cannot quietly move the case to the CUTLASS configs.
TEST(Gemm1GatherGpu, StreamGemmTallTile) {
  FMOE_REQUIRE_GPU();
  struct TallSwitch {
    cuda::StreamTallRule was = cuda::stream_tall_rule();
    TallSwitch() { cuda::set_stream_tall_rule({1, 1}); }
    ~TallSwitch() { cuda::set_stream_tall_rule(was); }
  } tall;
  alignas(16) static const uint8_t buf[16] = {};
  for (Format f : {Format::BF16, Format::FP8_TENSOR, Format::FP8_CHANNEL})
    for (int variant : {0, 1}) {
      Case c = gather_case(f, variant == 0, variant);
      c.M = variant == 0 ? 500 : 360;
      c.E = 8;
      c.topk = variant == 0 ? 2 : 3;
      cuda::GroupedGemmArgs g1;  // GEMM1 as the layer asks for it (tall_tile: > 64 rows per expert)
      g1.op = f == Format::BF16 ? cuda::Operand::BF16 : cuda::Operand::FP8;
      g1.a = g1.b = buf;
      g1.n = 2 * c.N;
      g1.k = c.K;
      g1.groups = static_cast<int>(c.E);
      g1.max_rows = c.M * c.topk;
      ASSERT_TRUE(cuda::stream_gemm_takes(g1, cuda::GemmPath::SM90_TMA)) << describe(c);
      ASSERT_GT(g1.max_rows, cuda::kStreamWideMaxRowsPerGroup * g1.groups) << describe(c);
      check_gathered(c, -1, false);
    }
}

// The stream GEMM's AUTO rule: the 64-row token tile from 256 tokens up (DeepSeek-V3 TP8 GEMM1 at
// 1024 tokens: 32 rows per expert); not the wide tile (64 rows per expert), not below 256 tokens.
TEST(Gemm1GatherGpu, StreamAutoRule) {
  alignas(16) static const uint16_t buf[8] = {};
  cuda::GroupedGemmArgs g;
  g.op = cuda::Operand::BF16;
  g.a = buf;
  g.b = buf;
  g.d_dtype = DType::F32;
  g.n = 512;
  g.k = 7168;
  g.groups = 256;
  g.max_rows = 1024 * 8;
  g.small_m_ok = false;
  cuda::ActivationParams ap;
  ap.N = 256;
  ap.R = 512;
  ap.op = cuda::Operand::BF16;
  ap.act_dtype = DType::BF16;
  ASSERT_TRUE(cuda::stream_gemm1_act_applies(g, cuda::GemmPath::SM90_TMA, ap));
  const auto applies = [&](cuda::Gemm1Gather mode, int64_t tokens) {
    GatherSwitch m(mode);
    return cuda::stream_gemm1_gather_applies(g, cuda::GemmPath::SM90_TMA, ap, buf, tokens);
  };
  EXPECT_TRUE(applies(cuda::Gemm1Gather::AUTO, 1024));
  EXPECT_FALSE(applies(cuda::Gemm1Gather::AUTO, 128));  // below 256 tokens
  EXPECT_TRUE(applies(cuda::Gemm1Gather::ON, 128));
  EXPECT_FALSE(applies(cuda::Gemm1Gather::OFF, 1024));
  g.groups = 128;  // 64 rows per expert: the wide token tile
  EXPECT_FALSE(applies(cuda::Gemm1Gather::AUTO, 1024));
  EXPECT_TRUE(applies(cuda::Gemm1Gather::ON, 1024));
}

TEST(Gemm1GatherGpu, IdsOutOfRangeAndUnmappedExperts) {
  FMOE_REQUIRE_GPU();
  for (Format f : {Format::BF16, Format::FP8_TENSOR, Format::FP8_CHANNEL}) {
    Case c = gather_case(f, true, 0);
    check_gathered(c, c.E + 3, false);  // ids E..E+2 are out of range (no expert): no rows
    check_gathered(c, -1, true);
  }
}

// The router weight on the input scales each slot's copy: nothing to gather, the permuted path.
TEST(Gemm1GatherGpu, RouterWeightOnInputKeepsThePermutedOperand) {
  FMOE_REQUIRE_GPU();
  GatherSwitch on(cuda::Gemm1Gather::ON);
  Case c = gather_case(Format::BF16, true, 0);
  c.on_input = true;
  const int64_t before = cuda::gathered_gemm1_launches();
  check_case(c);
  EXPECT_EQ(cuda::gathered_gemm1_launches(), before);
}

// Under AUTO the gather is taken only where the A/B found it paying: few column tiles (n <= 1024),
// K >= 4096, at most 128 rows per expert on average (DeepSeek-V3 TP8 at 4096 tokens), not with
// DeepSeek-V3 TP1's n = 4096, more rows per expert or Qwen3-30B-A3B's K = 2048; ON takes them
// all, OFF none.
TEST(Gemm1GatherGpu, AutoTakesOnlyFewColumnTilesLongK) {
  cuda::GroupedGemmArgs g;  // DeepSeek-V3 TP8 GEMM1 at 4096 tokens, bf16
  g.op = cuda::Operand::BF16;
  g.d_dtype = DType::F32;
  g.n = 512;
  g.k = 7168;
  g.groups = 256;
  g.max_rows = 4096 * 8;
  cuda::ActivationParams ap;
  ap.N = 256;
  ap.op = cuda::Operand::BF16;
  alignas(16) static const uint16_t x[8] = {};
  const auto applies = [&](cuda::Gemm1Gather mode) {
    GatherSwitch m(mode);
    return cuda::sm90_gemm1_gather_applies(g, cuda::GemmPath::SM90_TMA, ap, x, 4096);
  };
  if (!cuda::sm90_gemm1_act_applies(g, cuda::GemmPath::SM90_TMA, ap)) GTEST_SKIP() << "bf16 SM90 GEMMs not built";
  EXPECT_TRUE(applies(cuda::Gemm1Gather::AUTO));
  EXPECT_FALSE(applies(cuda::Gemm1Gather::OFF));
  g.max_rows = 4096 * 16;  // 256 rows per expert
  EXPECT_FALSE(applies(cuda::Gemm1Gather::AUTO));
  EXPECT_TRUE(applies(cuda::Gemm1Gather::ON));
  g.max_rows = 4096 * 8;
  g.n = 4096;  // DeepSeek-V3 TP1: 16 column tiles, each copying the rows again
  ap.N = 2048;
  {
    // (The bf16 call of this shape is the stream GEMM's tall token tile under the shipped rule,
    // stream_tall_tile_ok; with that tile off it is the CUTLASS GEMM1's.)
    const cuda::StreamTallRule was = cuda::stream_tall_rule();
    cuda::set_stream_tall_rule({INT64_MAX, cuda::kStreamTallMinN});
    EXPECT_FALSE(applies(cuda::Gemm1Gather::AUTO));
    EXPECT_TRUE(applies(cuda::Gemm1Gather::ON));
    cuda::set_stream_tall_rule(was);
  }
  g.n = 512;
  ap.N = 256;
  g.max_rows = 4096 * 8;
  g.k = 2048;  // a short k loop
  EXPECT_FALSE(applies(cuda::Gemm1Gather::AUTO));
  EXPECT_TRUE(applies(cuda::Gemm1Gather::ON));
  // 32-bit row offsets: tokens x row bytes beyond 4 GiB never gather.
  g.k = 7168;
  EXPECT_FALSE(cuda::sm90_gemm1_gather_applies(g, cuda::GemmPath::SM90_TMA, ap, x, int64_t{1} << 20));
}

// fp8-channel's GEMM1 + activation (per-channel dequant, per-row quantisation after) takes the
// same rule: DeepSeek-V3 TP8 at 4096 tokens gathers under AUTO, 256 rows per expert do not.
TEST(Gemm1GatherGpu, AutoRuleCoversFp8Channel) {
  cuda::GroupedGemmArgs g;
  g.op = cuda::Operand::FP8;
  g.d_dtype = DType::F32;
  g.n = 512;
  g.k = 7168;
  g.groups = 256;
  g.max_rows = 4096 * 8;
  cuda::ActivationParams ap;
  ap.N = 256;
  ap.op = cuda::Operand::FP8;
  ap.dq.kind = cuda::Dequant::CHANNEL;
  ap.quant = cuda::Fp8Quant::ROW;
  alignas(16) static const uint8_t x[16] = {};
  if (!cuda::sm90_gemm1_channel_act_applies(g, cuda::GemmPath::SM90_TMA, ap))
    GTEST_SKIP() << "fp8 SM90 GEMMs not built";
  GatherSwitch automatic(cuda::Gemm1Gather::AUTO);
  EXPECT_TRUE(cuda::sm90_gemm1_gather_applies(g, cuda::GemmPath::SM90_TMA, ap, x, 4096));
  g.max_rows = 4096 * 16;
  EXPECT_FALSE(cuda::sm90_gemm1_gather_applies(g, cuda::GemmPath::SM90_TMA, ap, x, 4096));
}

}  // namespace
}  // namespace fusedmoe::gputest
