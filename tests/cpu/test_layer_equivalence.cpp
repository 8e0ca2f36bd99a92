// Equivalences, edge cases, determinism and validation of the CPU layer.
#include <gtest/gtest.h>

#include "layer_test_util.hpp"

namespace fusedmoe::test {
namespace {

LayerFile make_layer(Format f, Activation act, int64_t E, int64_t K, int64_t N, uint64_t seed, bool bias = false,
                     GateUpOrder order = GateUpOrder::GATE_UP, bool interleaved = false, FloatLayer* keep = nullptr) {
  LayerConfig c;
  c.activation = act;
  c.gate_up_order = order;
  c.interleaved = interleaved;
  FloatLayer fl = random_float_layer(c, E, K, N, seed, bias, 0.08f);
  QuantizeOptions qo;
  qo.format = f;
  if (keep) *keep = fl;
  return quantize_layer(fl, qo);
}

// Swap the two halves (or the two members of each pair) of every w13 row block / bias.
FloatLayer swap_gate_up(FloatLayer l, bool interleaved) {
  const int64_t E = l.num_experts, K = l.hidden, N = l.inter;
  auto swap_rows = [&](std::vector<float>& m, int64_t cols) {
    std::vector<float> out(m.size());
    for (int64_t e = 0; e < E; ++e)
      for (int64_t r = 0; r < 2 * N; ++r) {
        const int64_t src = interleaved ? (r ^ 1) : (r < N ? r + N : r - N);
        std::copy(&m[(e * 2 * N + src) * cols], &m[(e * 2 * N + src) * cols] + cols, &out[(e * 2 * N + r) * cols]);
      }
    m = out;
  };
  swap_rows(l.w13, K);
  if (!l.w13_bias.empty()) swap_rows(l.w13_bias, 1);
  l.config.gate_up_order = l.config.gate_up_order == GateUpOrder::GATE_UP ? GateUpOrder::UP_GATE : GateUpOrder::GATE_UP;
  return l;
}

TEST(LayerEquivalence, GateUpEqualsUpGateAfterSwapping) {
  for (bool interleaved : {false, true}) {
    LayerConfig c;
    c.activation = interleaved ? Activation::SWIGLUOAI : Activation::SILU;
    c.interleaved = interleaved;
    FloatLayer fl = random_float_layer(c, 4, 64, 32, 7, true, 0.1f);
    QuantizeOptions qo;
    qo.format = Format::BF16;
    LayerFile a = quantize_layer(fl, qo);
    LayerFile b = quantize_layer(swap_gate_up(fl, interleaved), qo);
    Inputs in = random_inputs(11, 64, 2, 4, DType::BF16, 3);
    EXPECT_TRUE(bitwise_equal(run_layer(a, in, CpuPrecision::FAST), run_layer(b, in, CpuPrecision::FAST)));
  }
}

TEST(LayerEquivalence, InterleavedEqualsHalvesAfterPermutingRows) {
  for (Activation act : {Activation::SWIGLUOAI, Activation::SILU, Activation::GELU_TANH}) {
    LayerConfig c;
    c.activation = act;
    FloatLayer halves = random_float_layer(c, 3, 64, 16, 9, true, 0.3f);
    FloatLayer inter = halves;
    inter.config.interleaved = true;
    const int64_t E = 3, K = 64, N = 16;
    for (int64_t e = 0; e < E; ++e)
      for (int64_t n = 0; n < N; ++n)
        for (int half = 0; half < 2; ++half) {
          const int64_t src = e * 2 * N + half * N + n, dst = e * 2 * N + 2 * n + half;
          std::copy(&halves.w13[src * K], &halves.w13[src * K] + K, &inter.w13[dst * K]);
          inter.w13_bias[dst] = halves.w13_bias[src];
        }
    QuantizeOptions qo;
    qo.format = Format::FP32;
    Inputs in = random_inputs(7, K, 2, E, DType::F32, 5, 3.0f);
    EXPECT_TRUE(bitwise_equal(run_layer(quantize_layer(halves, qo), in, CpuPrecision::FAST),
                              run_layer(quantize_layer(inter, qo), in, CpuPrecision::FAST)))
        << activation_name(act);
  }
}

TEST(LayerEquivalence, ExpertMapSplitOverRanksSumsToFullLayer) {
  const int64_t E = 8, K = 64, N = 32, M = 13, topk = 3;
  FloatLayer fl;
  make_layer(Format::FP32, Activation::SILU, E, K, N, 21, true, GateUpOrder::GATE_UP, false, &fl);
  QuantizeOptions qo;
  qo.format = Format::FP32;
  const LayerFile full = quantize_layer(fl, qo);
  Inputs in = random_inputs(M, K, topk, E, DType::F32, 8);
  const auto ref = to_double(run_layer(full, in, CpuPrecision::ORACLE_FP64));
  for (int64_t ranks : {2, 4}) {
    const int64_t local = E / ranks;
    std::vector<double> sum(ref.size(), 0.0);
    for (int64_t rank = 0; rank < ranks; ++rank) {
      FloatLayer part = fl;
      part.num_experts = local;
      const int64_t R = fl.w13_rows();
      part.w13.assign(fl.w13.begin() + rank * local * R * K, fl.w13.begin() + (rank + 1) * local * R * K);
      part.w2.assign(fl.w2.begin() + rank * local * K * N, fl.w2.begin() + (rank + 1) * local * K * N);
      part.w13_bias.assign(fl.w13_bias.begin() + rank * local * R, fl.w13_bias.begin() + (rank + 1) * local * R);
      part.w2_bias.assign(fl.w2_bias.begin() + rank * local * K, fl.w2_bias.begin() + (rank + 1) * local * K);
      Inputs rin = in;
      rin.has_map = true;
      rin.expert_map = HostTensor(DType::I32, {E});
      for (int64_t g = 0; g < E; ++g)
        rin.expert_map.data<int32_t>()[g] = (g / local == rank) ? static_cast<int32_t>(g % local) : -1;
      const auto out = to_double(run_layer(quantize_layer(part, qo), rin, CpuPrecision::ORACLE_FP64));
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += out[i];
    }
    EXPECT_LT(rel_error(sum, ref), 1e-6) << ranks << " ranks";
  }
}

TEST(LayerEquivalence, RouterWeightOnInputTop1WithUnitWeightEqualsPlainLayer) {
  const LayerFile lf = make_layer(Format::BF16, Activation::SILU, 4, 64, 32, 4);
  Inputs in = random_inputs(10, 64, 1, 4, DType::BF16, 6);
  for (int64_t t = 0; t < 10; ++t) in.weights.data<float>()[t] = 1.0f;
  const HostTensor plain = run_layer(lf, in, CpuPrecision::FAST);
  in.on_input = true;
  EXPECT_TRUE(bitwise_equal(plain, run_layer(lf, in, CpuPrecision::FAST)));
}

TEST(LayerEquivalence, RouterWeightOnInputEqualsScaledInputAnyTopk) {
  const LayerFile lf = make_layer(Format::FP32, Activation::GELU, 5, 32, 16, 12);
  const int64_t M = 6, K = 32, topk = 3;
  Inputs in = random_inputs(M, K, topk, 5, DType::F32, 13);
  in.on_input = true;
  const auto got = to_double(run_layer(lf, in, CpuPrecision::ORACLE_FP64));
  // Reference: one token row per slot, scaled by its weight, routed top-1 with weight 1.
  Inputs flat = random_inputs(M * topk, K, 1, 5, DType::F32, 14);
  for (int64_t i = 0; i < M * topk; ++i) {
    for (int64_t k = 0; k < K; ++k)
      flat.hidden.data<float>()[i * K + k] = in.hidden.data<float>()[(i / topk) * K + k] * in.weights.data<float>()[i];
    flat.ids.data<int32_t>()[i] = in.ids.data<int32_t>()[i];
    flat.weights.data<float>()[i] = 1.0f;
  }
  const auto per_slot = to_double(run_layer(lf, flat, CpuPrecision::ORACLE_FP64));
  std::vector<double> ref(static_cast<size_t>(M * K), 0.0);
  for (int64_t i = 0; i < M * topk; ++i)
    for (int64_t k = 0; k < K; ++k) ref[(i / topk) * K + k] += per_slot[i * K + k];
  EXPECT_LT(rel_error(got, ref), 1e-6);
}

TEST(LayerEquivalence, Uint4b8EqualsSignedInt4) {
  LayerFile lf = make_layer(Format::W4A8_INT4, Activation::SILU, 3, 256, 128, 31);
  Inputs in = random_inputs(9, 256, 2, 3, DType::BF16, 31);
  const HostTensor ref = run_layer(lf, in, CpuPrecision::FAST);
  std::vector<int8_t> q;
  for (const char* name : {"w13_weight", "w2_weight"}) {
    HostTensor& t = lf.tensors.at(name);
    const size_t n = t.bytes.size() * 2;
    q.resize(n);
    unpack_int4(t.data<uint8_t>(), n, q.data());
    pack_uint4b8(q.data(), n, t.data<uint8_t>());
  }
  lf.config.int4_encoding = Int4Encoding::UINT4B8;
  EXPECT_TRUE(bitwise_equal(ref, run_layer(lf, in, CpuPrecision::FAST)));
}

TEST(LayerEdgeCases, ZeroTokens) {
  const LayerFile lf = make_layer(Format::BF16, Activation::SILU, 4, 64, 32, 1);
  Inputs in = random_inputs(0, 64, 2, 4, DType::BF16, 1);
  EXPECT_EQ(run_layer(lf, in, CpuPrecision::FAST).numel(), 0);
}

TEST(LayerEdgeCases, OutOfRangeIdsContributeNothing) {
  const LayerFile lf = make_layer(Format::FP32, Activation::SILU, 4, 64, 32, 2);
  Inputs in = random_inputs(8, 64, 2, 4, DType::F32, 2);
  Inputs zeroed = in;
  const int32_t bad[] = {-1, 4, 1000, -1000};
  for (int64_t t = 0; t < 8; t += 2) {
    in.ids.data<int32_t>()[t * 2 + 1] = bad[t / 2];
    zeroed.weights.data<float>()[t * 2 + 1] = 0.0f;
  }
  EXPECT_TRUE(bitwise_equal(run_layer(lf, in, CpuPrecision::FAST), run_layer(lf, zeroed, CpuPrecision::FAST)));
  // Every id out of range: the output is exactly zero.
  for (int64_t i = 0; i < 16; ++i) in.ids.data<int32_t>()[i] = -1;
  for (double v : to_double(run_layer(lf, in, CpuPrecision::FAST))) EXPECT_EQ(v, 0.0);
}

TEST(LayerEdgeCases, AllTokensOnOneExpertAndEmptyExperts) {
  const LayerFile lf = make_layer(Format::FP8_CHANNEL, Activation::SILU, 8, 128, 64, 3);
  Inputs in = random_inputs(33, 128, 1, 8, DType::BF16, 3);
  for (int64_t t = 0; t < 33; ++t) in.ids.data<int32_t>()[t] = 5;
  const auto fast = to_double(run_layer(lf, in, CpuPrecision::FAST));
  const auto oracle = to_double(run_layer(lf, in, CpuPrecision::ORACLE_FP64));
  EXPECT_LT(rel_error(fast, oracle), 2e-2);
}

TEST(LayerEdgeCases, Fp8BlockWithKAndNNotMultiplesOf128) {
  const LayerFile lf = make_layer(Format::FP8_BLOCK, Activation::SILU, 3, 200, 72, 4);
  Inputs in = random_inputs(5, 200, 2, 3, DType::BF16, 4);
  const auto oracle = to_double(run_layer(lf, in, CpuPrecision::ORACLE_FP64));
  const auto fast = to_double(run_layer(lf, in, CpuPrecision::FAST));
  EXPECT_LT(rel_error(fast, oracle), 3e-2);
}

TEST(LayerEdgeCases, FourBitFormatsRefuseKNotAMultipleOfTheBlock) {
  LayerFile lf = make_layer(Format::MXFP4, Activation::SILU, 2, 64, 32, 5);
  // Cut the packed K of w13 to 48 values: 48 is not a multiple of 32.
  LayerWeights w = lf.weights();
  w.w2_weight.shape[1] = 48;
  try {
    Layer layer(lf.config, w, LayerOptions{Backend::CPU});
    FAIL() << "expected an error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("K"), std::string::npos) << e.what();
  }
}

TEST(LayerDeterminism, BitwiseIdenticalAcrossRunsAndThreadCounts) {
  const LayerFile lf = make_layer(Format::FP8_BLOCK, Activation::SILU, 6, 256, 128, 6);
  Inputs in = random_inputs(17, 256, 3, 6, DType::BF16, 6);
  const HostTensor one = run_layer(lf, in, CpuPrecision::FAST, 1);
  EXPECT_TRUE(bitwise_equal(one, run_layer(lf, in, CpuPrecision::FAST, 1)));
  EXPECT_TRUE(bitwise_equal(one, run_layer(lf, in, CpuPrecision::FAST, 2)));
  EXPECT_TRUE(bitwise_equal(one, run_layer(lf, in, CpuPrecision::FAST, 3)));
}

template <typename F>
void expect_invalid(F&& f, const std::string& argument) {
  try {
    f();
    ADD_FAILURE() << "expected InvalidArgument for " << argument;
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected"), std::string::npos);
  }
}

TEST(LayerValidation, BadArgumentsAreNamed) {
  const LayerFile lf = make_layer(Format::FP8_TENSOR, Activation::SILU, 4, 64, 32, 7);
  const LayerWeights good = lf.weights();
  expect_invalid([&] { LayerWeights w = good; w.w13_weight_scale = {}; Layer(lf.config, w); }, "w13_weight_scale");
  expect_invalid([&] { LayerWeights w = good; w.w2_weight.dtype = DType::BF16; Layer(lf.config, w); }, "w2_weight");
  expect_invalid([&] { LayerWeights w = good; w.w13_weight.shape[2] = 63; Layer(lf.config, w); }, "w13_weight");
  {  // interleaved needs gate / up pairs: refused for relu2
    const LayerFile r2 = make_layer(Format::FP8_TENSOR, Activation::RELU2, 4, 64, 32, 7);
    expect_invalid([&] { LayerConfig c = r2.config; c.interleaved = true; Layer(c, r2.weights()); }, "interleaved");
  }
  expect_invalid([&] { LayerConfig c = lf.config; c.act_dtype = ActDtype::FP8; Layer(c, good); }, "act_dtype");

  Layer layer(lf.config, good, LayerOptions{Backend::CPU});
  Inputs in = random_inputs(4, 64, 2, 4, DType::BF16, 7);
  HostTensor out(DType::BF16, {4, 64});
  expect_invalid([&] { RunArgs a = make_args(in, out); a.topk_ids.dtype = DType::I64; layer.run(a); }, "topk_ids");
  expect_invalid([&] { RunArgs a = make_args(in, out); a.topk_weights.shape[1] = 3; layer.run(a); }, "topk_weights");
  expect_invalid([&] { RunArgs a = make_args(in, out); a.hidden_states.shape[1] = 65; layer.run(a); }, "hidden_states");
  expect_invalid([&] { RunArgs a = make_args(in, out); a.output.dtype = DType::F32; layer.run(a); }, "output");
  expect_invalid([&] { RunArgs a = make_args(in, out); a.hidden_states.strides[0] = 128; layer.run(a); }, "hidden_states");
  expect_invalid([&] { RunArgs a = make_args(in, out); a.output.device = DeviceType::CUDA; layer.run(a); }, "output");
}

}  // namespace
}  // namespace fusedmoe::test
