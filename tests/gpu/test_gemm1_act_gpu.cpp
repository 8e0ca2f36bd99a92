// GEMM1 with the activation in its epilogue (sm90_gated_act_epilogue.cuh): large batches of
// bf16 / static fp8-tensor layers, gate / up rows interleaved or in halves.
// - against the float64 oracle for every gated activation, both gate / up orders, both row
//   layouts, biases, router weight on input, tiles cut by the problem edges (rows per expert not
//   multiples of the 128-row tile; interleaved 2N not a multiple of the 256-column tile; halves
//   with N = 320, a last tile of 64 rows per half), with graph replay bitwise equal to the first
//   run (check_case);
// - bitwise equal to the unfused stages: the interleaved layer gives the output bytes of the same
//   layer in halves order with half a row not a 16-byte multiple (GEMM1 to h, then the activation
//   kernel), since the epilogue runs the activation kernel's arithmetic on the same sums; and the
//   halves layer (fused through PairedHalvesMainloop) gives the bytes of the interleaved one;
// - the fused path is the one that ran: run_timed's activation stage is empty.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>

#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

struct FusedFormat {
  Format format;
  bool fp8_static;
  const char* name;
};
const FusedFormat kFormats[] = {{Format::BF16, false, "bf16"}, {Format::FP8_TENSOR, true, "fp8_tensor_static"}};
const Activation kActs[] = {Activation::SILU, Activation::GELU, Activation::GELU_TANH, Activation::SWIGLUOAI};

// More than 32 rows per expert (the large configs), several 128-row M tiles per expert and 2N
// over more than one 256-column N tile.
Case fused_case(int fi, Activation act, int variant, bool halves = false) {
  Case c;
  c.format = kFormats[fi].format;
  c.fp8_static = kFormats[fi].fp8_static;
  c.act = act;
  c.interleaved = !halves;
  c.hidden_dtype = DType::BF16;
  c.order = variant == 0 ? GateUpOrder::GATE_UP : GateUpOrder::UP_GATE;
  c.bias = variant == 1;
  c.on_input = variant == 1;
  c.topk = variant == 0 ? 2 : 3;
  c.M = 500;
  c.K = 512;
  // Interleaved: 2N = 400, one full 256-column tile and one of 144. Halves: 128 rows of each
  // half per tile, N = 320: two full tiles and one holding 64 rows of each half (the TMA's zeros
  // past N, stores predicated).
  c.N = halves ? 320 : 200;
  c.E = 4;
  c.seed = 4200u + 100u * static_cast<uint64_t>(fi) + 10u * static_cast<uint64_t>(act) + variant + (halves ? 5u : 0u);
  c.w_gain = act == Activation::SWIGLUOAI ? 6.0f : 1.0f;
  return c;
}

class Gemm1ActGpu : public ::testing::TestWithParam<std::tuple<int, int, int, bool>> {};

TEST_P(Gemm1ActGpu, MatchesOracle) {
  FMOE_REQUIRE_GPU();
  const auto [fi, ai, variant, halves] = GetParam();
  expect_fused_gemm1(cuda::FusedGemm1::BF16_OR_FP8_TENSOR, true, [&] { check_case(fused_case(fi, kActs[ai], variant, halves)); });
}

std::string fused_case_name(const ::testing::TestParamInfo<std::tuple<int, int, int, bool>>& info) {
  const auto [fi, ai, variant, halves] = info.param;
  return std::string(kFormats[fi].name) + "_" + activation_name(kActs[ai]) +
         (variant == 0 ? "_gate_up" : "_up_gate_bias_oninput") + (halves ? "_halves" : "_interleaved");
}

INSTANTIATE_TEST_SUITE_P(FormatsActivations, Gemm1ActGpu,
                         ::testing::Combine(::testing::Range(0, 2), ::testing::Range(0, 4), ::testing::Range(0, 2),
                                            ::testing::Bool()),
                         fused_case_name);

// The interleaved layer's rows (and fc1 bias) in halves order: the same layer for the oracle.
LayerFile to_halves(const LayerFile& inter) {
  LayerFile h = inter;
  h.config.interleaved = false;
  const int64_t E = inter.num_experts, N = inter.inter;
  auto permute = [&](const char* name) {
    auto it = inter.tensors.find(name);
    if (it == inter.tensors.end()) return;
    const HostTensor& src = it->second;
    HostTensor& dst = h.tensors.at(name);
    const size_t row = src.bytes.size() / static_cast<size_t>(E * 2 * N);  // bytes per w13 row
    for (int64_t e = 0; e < E; ++e)
      for (int64_t r = 0; r < 2 * N; ++r) {
        const int64_t half = r % 2, n = r / 2;  // interleaved row r = member `half` of pair n
        const int64_t to = e * 2 * N + half * N + n, from = e * 2 * N + r;
        std::memcpy(dst.bytes.data() + to * row, src.bytes.data() + from * row, row);
      }
  };
  permute("w13_weight");
  permute("w13_bias");
  return h;
}

// The activation stage of run_timed: the least of five runs (two adjacent events read 1-2 us
// when the stage is empty; noise only adds to it).
double activation_stage_ms(const Layer& layer, DeviceRun& run) {
  double best = 1e30;
  for (int i = 0; i < 5; ++i) best = std::min(best, layer.run_timed(run.args).activation_ms);
  return best;
}

// One case as two layers on the GPU: its rows interleaved, and the same rows in halves order.
struct InterleavedAndHalves {
  explicit InterleavedAndHalves(const Case& c)
      : inter(make_layer(c)), halves(to_halves(inter)), in(make_inputs(c, c.E)), di(inter), dh(halves),
        li(inter.config, di.weights), lh(halves.config, dh.weights) {}
  LayerFile inter, halves;
  Inputs in;
  DeviceLayer di, dh;
  Layer li, lh;
};

TEST(Gemm1ActPathsGpu, BitwiseEqualToUnfusedStages) {
  FMOE_REQUIRE_GPU();
  for (int fi = 0; fi < 2; ++fi)
    for (Activation act : {Activation::SILU, Activation::SWIGLUOAI}) {
      Case c = fused_case(fi, act, 1);
      // K > 1024: both GEMM1s on the cooperative 128 x 256 mainloop (no pingpong). Half a w13 row
      // (2056 bf16 / 2064 fp8 values: 2056 / 1032 bytes) is not a 16-byte multiple, so the halves
      // layer cannot pair its rows and runs GEMM1, then the activation kernel.
      c.K = fi == 0 ? 2056 : 2064;
      SCOPED_TRACE(describe(c));
      InterleavedAndHalves l(c);
      const HostTensor a = run_gpu(l.li, l.in), b = run_gpu(l.lh, l.in);
      EXPECT_TRUE(matches_oracle(a, run_oracle(l.halves, l.in), tolerance(c)));
      EXPECT_TRUE(test::bitwise_equal(a, b)) << "fused GEMM1 + activation differs from GEMM1 then the activation kernel";

      // The fused layer ran no activation kernel (its stage is two adjacent events); the halves
      // layer did.
      DeviceRun rf(l.li, l.in), rh(l.lh, l.in);
      const double tf = activation_stage_ms(l.li, rf), th = activation_stage_ms(l.lh, rh);
      EXPECT_LT(tf, 0.002) << "activation stage of the fused layer";
      EXPECT_GT(th, tf);
      EXPECT_TRUE(test::bitwise_equal(a, rf.result(l.in)));
    }
}

// Halves rows fuse through PairedHalvesMainloop: the same layer with interleaved rows (fused the
// other way, bitwise equal to the unfused stages above) gives the same bytes, and neither ran the
// activation kernel.
TEST(Gemm1ActPathsGpu, HalvesBitwiseEqualToInterleaved) {
  FMOE_REQUIRE_GPU();
  for (int fi = 0; fi < 2; ++fi)
    for (Activation act : {Activation::SILU, Activation::SWIGLUOAI})
      for (int variant = 0; variant < 2; ++variant) {
        Case c = fused_case(fi, act, variant, /*halves=*/false);
        c.N = 384;
        c.K = 2048;
        SCOPED_TRACE(describe(c));
        InterleavedAndHalves l(c);
        const HostTensor a = run_gpu(l.lh, l.in), b = run_gpu(l.li, l.in);
        EXPECT_TRUE(matches_oracle(a, run_oracle(l.halves, l.in), tolerance(c)));
        EXPECT_TRUE(test::bitwise_equal(a, b)) << "halves-paired GEMM1 + activation differs from the interleaved one";
        DeviceRun rh(l.lh, l.in);
        EXPECT_LT(activation_stage_ms(l.lh, rh), 0.002) << "activation stage of the fused halves layer";
      }
}

// fp8-channel (per-token x per-channel scales): GEMM1 + activation with the per-channel dequant in
// the epilogue, bf16 rows, then their per-row quantisation (sm90_gemm1_channel_act_applies), for
// every gated activation, both orders, bias / router weight on input, both row layouts (halves
// with a partial last tile), against the oracle with graph replay bitwise equal.
class Gemm1ChannelActGpu : public ::testing::TestWithParam<std::tuple<int, int, bool>> {};

TEST_P(Gemm1ChannelActGpu, MatchesOracle) {
  FMOE_REQUIRE_GPU();
  const auto [ai, variant, halves] = GetParam();
  Case c = fused_case(1, kActs[ai], variant, halves);
  c.format = Format::FP8_CHANNEL;
  c.fp8_static = false;
  c.seed += 300;
  expect_fused_gemm1(cuda::FusedGemm1::FP8_CHANNEL, true, [&] { check_case(c); });
}

std::string channel_case_name(const ::testing::TestParamInfo<std::tuple<int, int, bool>>& info) {
  const auto [ai, variant, halves] = info.param;
  return std::string(activation_name(kActs[ai])) + (variant == 0 ? "_gate_up" : "_up_gate_bias_oninput") +
         (halves ? "_halves" : "_interleaved");
}

INSTANTIATE_TEST_SUITE_P(Activations, Gemm1ChannelActGpu,
                         ::testing::Combine(::testing::Range(0, 4), ::testing::Range(0, 2), ::testing::Bool()),
                         channel_case_name);

// fp8-channel in the few-rows range: the stream GEMM's GEMM1 + activation with the per-channel
// dequant, bf16 rows, then their per-row quantisation (stream_gemm1_channel_act_applies): 20 rows
// per expert (the 64-row token tile) and 60 (the 128-row tile), every gated activation, both
// orders, bias / router weight on input, both row layouts, against the oracle.
class StreamChannelActGpu : public ::testing::TestWithParam<std::tuple<int, int, bool, bool>> {};

TEST_P(StreamChannelActGpu, MatchesOracle) {
  FMOE_REQUIRE_GPU();
  const auto [ai, variant, halves, wide] = GetParam();
  Case c = fused_case(1, kActs[ai], variant, halves);
  c.format = Format::FP8_CHANNEL;
  c.fp8_static = false;
  c.topk = 2;
  c.E = 8;
  c.M = wide ? 240 : 80;
  c.K = 1024;
  c.seed += 700;
  expect_fused_gemm1(cuda::FusedGemm1::FP8_CHANNEL, true, [&] { check_case(c); });
}

std::string stream_channel_case_name(const ::testing::TestParamInfo<std::tuple<int, int, bool, bool>>& info) {
  const auto [ai, variant, halves, wide] = info.param;
  return std::string(activation_name(kActs[ai])) + (variant == 0 ? "_gate_up" : "_up_gate_bias_oninput") +
         (halves ? "_halves" : "_interleaved") + (wide ? "_60rows" : "_20rows");
}

INSTANTIATE_TEST_SUITE_P(Activations, StreamChannelActGpu,
                         ::testing::Combine(::testing::Range(0, 4), ::testing::Range(0, 2), ::testing::Bool(),
                                            ::testing::Bool()),
                         stream_channel_case_name);

// Paths that stay unfused: dynamic fp8-tensor (its scale needs every output's amax) and decode
// sizes (small-M kernels); fp8-channel here runs fused (above); checked against the oracle.
TEST(Gemm1ActPathsGpu, UnfusedCasesMatchOracle) {
  FMOE_REQUIRE_GPU();
  for (Format f : {Format::FP8_TENSOR, Format::FP8_CHANNEL, Format::FP16}) {
    Case c = fused_case(0, Activation::SILU, 0);
    c.format = f;
    c.fp8_static = false;
    c.hidden_dtype = f == Format::FP16 ? DType::F16 : DType::BF16;
    c.seed += 77;
    // (fp8-channel: its own fused kernel, Gemm1ChannelActGpu; not the bf16 / fp8-tensor one.)
    expect_fused_gemm1(cuda::FusedGemm1::BF16_OR_FP8_TENSOR, false, [&] { check_case(c); });
  }
  for (int fi = 0; fi < 2; ++fi) {
    Case c = fused_case(fi, Activation::GELU, 0);
    c.M = 3;  // decode: small-M kernels
    expect_fused_gemm1(cuda::FusedGemm1::BF16_OR_FP8_TENSOR, false, [&] { check_case(c); });
  }
  // Halves rows that the pairing cannot take: rows whose half is not a 16-byte multiple (bf16
  // K = 1032: 2064-byte rows).
  {
    Case c = fused_case(0, Activation::SILU, 0, /*halves=*/true);
    c.K = 1032;
    expect_fused_gemm1(cuda::FusedGemm1::BF16_OR_FP8_TENSOR, false, [&] { check_case(c); });
  }
}

}  // namespace
}  // namespace fusedmoe::gputest
