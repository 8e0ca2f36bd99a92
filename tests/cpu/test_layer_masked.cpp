// Pre-quantised fp8-block inputs (e4m3 codes + 1x128 scales, RunArgs::hidden_states_scale), the
// batched/masked layout (Layer::run_masked) and Layer::warmup on the CPU backend (and oracle):
// equivalences with the plain layer, an independent float64 reference for "GEMM1 operand =
// q * s, no re-quantisation", validation naming every bad argument.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "fusedmoe/quantize.hpp"
#include "layer_test_util.hpp"

namespace fusedmoe::test {
namespace {

LayerFile make_layer(Format f, Activation act, int64_t E, int64_t K, int64_t N, uint64_t seed, bool bias,
                     bool fp8_static = false) {
  LayerConfig c;
  c.activation = act;
  FloatLayer fl = random_float_layer(c, E, K, N, seed, bias, 0.08f);
  QuantizeOptions qo;
  qo.format = f;
  if (fp8_static) {
    qo.fp8_w13_input_scale = 4.0f / 448.0f;
    qo.fp8_w2_input_scale = 1.0f / 448.0f;
  }
  return quantize_layer(fl, qo);
}

float value_of(const HostTensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::F32: return t.data<float>()[i];
    case DType::BF16: return bf16_bits_to_float(t.data<uint16_t>()[i]);
    case DType::F16: return fp16_bits_to_float(t.data<uint16_t>()[i]);
    default: return NAN;
  }
}

// Codes and scales of quantize_fp8_per_token_group on a [rows, K] float-dtype tensor.
struct Quantised {
  HostTensor codes, scales;
};
Quantised quantise_groups(const HostTensor& x, bool ue8m0) {
  const int64_t K = x.shape.back(), rows = x.numel() / K, G = (K + 127) / 128;
  std::vector<float> f(static_cast<size_t>(rows * K));
  for (int64_t i = 0; i < rows * K; ++i) f[i] = value_of(x, i);
  std::vector<int64_t> cshape = x.shape, sshape = x.shape;
  sshape.back() = G;
  Quantised q{HostTensor(DType::F8_E4M3, cshape), HostTensor(DType::F32, sshape)};
  quantize_fp8_per_token_group(f.data(), rows, K, 128, ue8m0, q.codes.data<uint8_t>(), q.scales.data<float>());
  return q;
}

HostTensor poisoned(DType d, std::vector<int64_t> shape) {
  HostTensor t(d, std::move(shape));
  if (!t.bytes.empty()) std::memset(t.bytes.data(), 0xFF, t.bytes.size());
  return t;
}

HostTensor run_prequant(const LayerFile& lf, const Inputs& in, const Quantised& q, DType out_dtype, CpuPrecision prec) {
  Layer layer(lf.config, lf.weights(), LayerOptions{Backend::CPU, 0, prec});
  HostTensor out = poisoned(out_dtype, in.hidden.shape);
  RunArgs a = make_args(in, out);
  a.hidden_states = q.codes.view();
  a.hidden_states_scale = q.scales.view();
  layer.run(a);
  return out;
}

template <class F>
void expect_invalid(F&& f, const std::string& argument) {
  try {
    f();
    ADD_FAILURE() << "expected InvalidArgument for " << argument;
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
  }
}

// ---------------------------------------------------------------- A: pre-quantised inputs

// Quantising bf16 inputs on the host and passing codes + scales gives, bit for bit, what the
// layer computes from the bf16 inputs (it quantises them with the same codec); both precisions.
TEST(PrequantizedInput, EqualsQuantisingInsideTheLayer) {
  for (bool ue8m0 : {false, true})
    for (CpuPrecision prec : {CpuPrecision::FAST, CpuPrecision::ORACLE_FP64}) {
      LayerFile lf = make_layer(Format::FP8_BLOCK, Activation::SILU, 4, 320, 192, 11, true);  // ragged groups
      lf.config.fp8_block_ue8m0 = ue8m0;
      const Inputs in = random_inputs(9, 320, 2, 4, DType::BF16, 5);
      const Quantised q = quantise_groups(in.hidden, ue8m0);
      const HostTensor ref = run_layer(lf, in, prec);
      const HostTensor got = run_prequant(lf, in, q, DType::BF16, prec);
      EXPECT_TRUE(bitwise_equal(got, ref)) << "ue8m0 " << ue8m0 << " oracle " << (prec == CpuPrecision::ORACLE_FP64);
    }
}

// The output dtype is the activation dtype: F32 / F16 outputs agree with BF16 to bf16 precision.
TEST(PrequantizedInput, OutputDtypeIsChosenByTheOutput) {
  LayerFile lf = make_layer(Format::FP8_BLOCK, Activation::SILU, 4, 256, 128, 12, false);
  const Inputs in = random_inputs(7, 256, 2, 4, DType::BF16, 6);
  const Quantised q = quantise_groups(in.hidden, false);
  const auto b = to_double(run_prequant(lf, in, q, DType::BF16, CpuPrecision::ORACLE_FP64));
  for (DType d : {DType::F32, DType::F16}) {
    const auto o = to_double(run_prequant(lf, in, q, d, CpuPrecision::ORACLE_FP64));
    EXPECT_LT(rel_error(o, b), 2e-2) << dtype_name(d);
  }
}

// An independent float64 evaluation (top-1, weight 1, F32 output): GEMM1's operand is exactly
// codes * scales (scales that are NOT amax / 448 of the group, so a re-quantisation would
// change them), the activation is rounded to the output dtype (F32) and quantised per group
// for GEMM2 with the CPU codec.
TEST(PrequantizedInput, OperandIsCodesTimesScalesWithoutRequantisation) {
  const int64_t E = 3, K = 256, N = 128, M = 6;
  LayerFile lf = make_layer(Format::FP8_BLOCK, Activation::SILU, E, K, N, 13, true);
  const FloatLayer fl = dequantize_layer(lf);
  Inputs in = random_inputs(M, K, 1, E, DType::BF16, 7);
  for (int64_t t = 0; t < M; ++t) in.weights.data<float>()[t] = 1.0f;
  Quantised q{HostTensor(DType::F8_E4M3, {M, K}), HostTensor(DType::F32, {M, K / 128})};
  std::mt19937 rng(3);
  for (int64_t i = 0; i < M * K; ++i) {
    uint8_t c = static_cast<uint8_t>(rng() % 0x68);  // |value| <= 1.75 * 2^5 = 56 (never 448)
    if (rng() % 2) c |= 0x80;
    q.codes.data<uint8_t>()[i] = c;
  }
  for (int64_t i = 0; i < M * K / 128; ++i) q.scales.data<float>()[i] = 0.003f * static_cast<float>(1 + i % 5);
  const auto got = to_double(run_prequant(lf, in, q, DType::F32, CpuPrecision::ORACLE_FP64));

  const int64_t R = 2 * N;
  std::vector<double> ref(static_cast<size_t>(M * K));
  for (int64_t t = 0; t < M; ++t) {
    const int64_t e = in.ids.data<int32_t>()[t];
    std::vector<double> h(static_cast<size_t>(R));
    for (int64_t j = 0; j < R; ++j) {
      double s = fl.w13_bias[e * R + j];
      for (int64_t k = 0; k < K; ++k)
        s += double(fl.w13[(e * R + j) * K + k]) * double(e4m3_to_float(q.codes.data<uint8_t>()[t * K + k])) *
             double(q.scales.data<float>()[t * (K / 128) + k / 128]);
      h[j] = s;
    }
    std::vector<float> a(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n) a[n] = float(h[n] / (1 + std::exp(-h[n])) * h[N + n]);
    std::vector<uint8_t> a_q(static_cast<size_t>(N));
    std::vector<float> a_s(static_cast<size_t>(N / 128));
    quantize_fp8_per_token_group(a.data(), 1, N, 128, false, a_q.data(), a_s.data());
    for (int64_t c = 0; c < K; ++c) {
      double s = fl.w2_bias[e * K + c];
      for (int64_t n = 0; n < N; ++n)
        s += double(fl.w2[(e * K + c) * N + n]) * double(e4m3_to_float(a_q[n])) * double(a_s[n / 128]);
      ref[t * K + c] = double(float(s));
    }
  }
  EXPECT_LT(rel_error(got, ref), 1e-5);
}

TEST(PrequantizedInput, BadArgumentsAreNamed) {
  LayerFile lf = make_layer(Format::FP8_BLOCK, Activation::SILU, 4, 256, 128, 14, false);
  Layer layer(lf.config, lf.weights(), LayerOptions{Backend::CPU});
  const Inputs in = random_inputs(5, 256, 2, 4, DType::BF16, 8);
  const Quantised q = quantise_groups(in.hidden, false);
  HostTensor out(DType::BF16, {5, 256});
  auto good = [&] {
    RunArgs a = make_args(in, out);
    a.hidden_states = q.codes.view();
    a.hidden_states_scale = q.scales.view();
    return a;
  };
  EXPECT_NO_THROW(layer.run(good()));
  expect_invalid([&] { RunArgs a = good(); a.hidden_states_scale = {}; layer.run(a); }, "hidden_states_scale");
  expect_invalid([&] { RunArgs a = good(); a.hidden_states_scale.shape[1] = 3; layer.run(a); }, "hidden_states_scale");
  expect_invalid([&] { RunArgs a = good(); a.hidden_states_scale.dtype = DType::BF16; layer.run(a); }, "hidden_states_scale");
  expect_invalid([&] { RunArgs a = good(); a.hidden_states_scale.strides = {1, 5}; layer.run(a); }, "hidden_states_scale");
  expect_invalid([&] { RunArgs a = good(); a.hidden_states = in.hidden.view(); layer.run(a); }, "hidden_states_scale");
  expect_invalid([&] { RunArgs a = good(); a.output.dtype = DType::F8_E4M3; layer.run(a); }, "output");
  expect_invalid([&] { RunArgs a = good(); a.output.dtype = DType::I32; layer.run(a); }, "output");
  expect_invalid([&] { RunArgs a = good(); a.output.shape[0] = 4; layer.run(a); }, "output");
  expect_invalid([&] { RunArgs a = good(); a.hidden_states.dtype = DType::F8_E5M2; layer.run(a); }, "hidden_states");
  expect_invalid([&] { RunArgs a = good(); a.apply_router_weight_on_input = true; layer.run(a); },
                 "apply_router_weight_on_input");
  // Other formats take no pre-quantised inputs.
  LayerFile lf8 = make_layer(Format::FP8_CHANNEL, Activation::SILU, 4, 256, 128, 14, false);
  Layer channel(lf8.config, lf8.weights(), LayerOptions{Backend::CPU});
  expect_invalid([&] { channel.run(good()); }, "hidden_states");
  // A scale tensor without pre-quantised inputs.
  expect_invalid([&] { RunArgs a = make_args(in, out); a.hidden_states_scale = q.scales.view(); layer.run(a); },
                 "hidden_states_scale");
}

// ---------------------------------------------------------------- B: the masked layout

struct MaskedCase {
  Format format;
  Activation act;
  bool bias;
  bool fp8_static;
  bool prequantized;
};

// Masked hidden states [E, T, K]: valid rows random, rows past the count huge garbage (which must
// affect nothing, not even the fp8-tensor dynamic scale).
HostTensor masked_hidden(int64_t E, int64_t T, int64_t K, DType d, const std::vector<int32_t>& counts, uint64_t seed) {
  const Inputs r = random_inputs(E * T, K, 1, 1, d, seed);
  HostTensor x(d, {E, T, K});
  x.bytes = r.hidden.bytes;
  for (int64_t e = 0; e < E; ++e)
    for (int64_t t = std::max<int32_t>(counts[e], 0); t < T; ++t)
      for (int64_t k = 0; k < K; ++k) {
        const int64_t i = (e * T + t) * K + k;
        if (d == DType::F32) x.data<float>()[i] = 3.0e4f;
        else if (d == DType::BF16) x.data<uint16_t>()[i] = float_to_bf16_bits(3.0e4f);
        else x.data<uint16_t>()[i] = float_to_fp16_bits(3.0e4f);
      }
  return x;
}

// run_masked equals, row for row and bit for bit, the plain layer over the valid rows with
// top-1 routing to their expert and weight 1; rows past the count are zero.
TEST(MaskedLayout, EqualsContiguousTop1WithUnitWeights) {
  const MaskedCase cases[] = {
      {Format::BF16, Activation::SILU, true, false, false},
      {Format::FP32, Activation::RELU2, true, false, false},
      {Format::FP8_TENSOR, Activation::SILU, false, false, false},  // dynamic: amax over valid rows only
      {Format::FP8_TENSOR, Activation::GELU, true, true, false},
      {Format::FP8_CHANNEL, Activation::SILU, false, false, false},
      {Format::FP8_BLOCK, Activation::SWIGLUOAI, true, false, false},
      {Format::FP8_BLOCK, Activation::SILU, false, false, true},
      {Format::W4A8_INT4, Activation::SILU, false, false, false},
      {Format::MXFP4, Activation::SILU, true, false, false},
  };
  const int64_t E = 4, T = 6, K = 256, N = 128;
  const std::vector<int32_t> counts = {3, 0, 9, -2};  // ragged, empty, above T (clamped), negative
  for (const MaskedCase& mc : cases)
    for (CpuPrecision prec : {CpuPrecision::FAST, CpuPrecision::ORACLE_FP64}) {
      SCOPED_TRACE(std::string(format_name(mc.format)) + " " + activation_name(mc.act) +
                   (mc.prequantized ? " prequantized" : "") + (prec == CpuPrecision::ORACLE_FP64 ? " oracle" : " fast"));
      const DType d = mc.format == Format::FP32 ? DType::F32 : DType::BF16;
      LayerFile lf = make_layer(mc.format, mc.act, E, K, N, 21, mc.bias, mc.fp8_static);
      Layer layer(lf.config, lf.weights(), LayerOptions{Backend::CPU, 0, prec});
      const HostTensor x = masked_hidden(E, T, K, d, counts, 31);
      HostTensor cnt(DType::I32, {E});
      std::memcpy(cnt.bytes.data(), counts.data(), 4 * E);
      HostTensor out = poisoned(d, {E, T, K});
      MaskedArgs m;
      Quantised q;
      if (mc.prequantized) {
        q = quantise_groups(x, false);
        m.hidden_states = q.codes.view();
        m.hidden_states_scale = q.scales.view();
      } else {
        m.hidden_states = x.view();
      }
      m.expert_num_tokens = cnt.view();
      m.output = out.view();
      EXPECT_EQ(layer.masked_workspace_size(T), 0u);
      ASSERT_TRUE(layer.can_implement_masked(layer.validate_masked(m)).ok);
      layer.run_masked(m);

      // The plain layer over the valid rows, in (e, t) order.
      std::vector<std::pair<int64_t, int64_t>> valid;
      for (int64_t e = 0; e < E; ++e)
        for (int64_t t = 0; t < std::min<int64_t>(std::max(counts[e], 0), T); ++t) valid.push_back({e, t});
      const int64_t Mv = static_cast<int64_t>(valid.size());
      const size_t es = dtype_size(d), row = static_cast<size_t>(K) * es;
      Inputs in;
      in.hidden = HostTensor(d, {Mv, K});
      in.ids = HostTensor(DType::I32, {Mv, 1});
      in.weights = HostTensor(DType::F32, {Mv, 1});
      Quantised qv{HostTensor(DType::F8_E4M3, {Mv, K}), HostTensor(DType::F32, {Mv, K / 128})};
      for (int64_t r = 0; r < Mv; ++r) {
        const int64_t src = valid[r].first * T + valid[r].second;
        std::memcpy(in.hidden.bytes.data() + r * row, x.bytes.data() + src * row, row);
        in.ids.data<int32_t>()[r] = static_cast<int32_t>(valid[r].first);
        in.weights.data<float>()[r] = 1.0f;
        if (mc.prequantized) {
          std::memcpy(qv.codes.bytes.data() + r * K, q.codes.bytes.data() + src * K, K);
          std::memcpy(qv.scales.bytes.data() + r * (K / 128) * 4, q.scales.bytes.data() + src * (K / 128) * 4, K / 128 * 4);
        }
      }
      const HostTensor ref = mc.prequantized ? run_prequant(lf, in, qv, d, prec) : run_layer(lf, in, prec);
      int64_t r = 0;
      for (int64_t e = 0; e < E; ++e)
        for (int64_t t = 0; t < T; ++t) {
          const uint8_t* got = out.bytes.data() + (e * T + t) * row;
          if (t < counts[e]) {
            EXPECT_EQ(std::memcmp(got, ref.bytes.data() + r * row, row), 0) << "row e=" << e << " t=" << t;
            ++r;
          } else {
            for (int64_t k = 0; k < K; ++k) ASSERT_EQ(value_of(out, (e * T + t) * K + k), 0.0f) << "e=" << e << " t=" << t;
          }
        }
    }
}

TEST(MaskedLayout, ZeroRowsPerExpertAndAllEmpty) {
  LayerFile lf = make_layer(Format::BF16, Activation::SILU, 3, 64, 32, 22, false);
  Layer layer(lf.config, lf.weights(), LayerOptions{Backend::CPU});
  HostTensor x(DType::BF16, {3, 0, 64}), out(DType::BF16, {3, 0, 64}), cnt(DType::I32, {3});
  MaskedArgs m;
  m.hidden_states = x.view();
  m.expert_num_tokens = cnt.view();
  m.output = out.view();
  EXPECT_NO_THROW(layer.run_masked(m));
  HostTensor x2(DType::BF16, {3, 4, 64});
  HostTensor out2 = poisoned(DType::BF16, {3, 4, 64});
  m.hidden_states = x2.view();
  m.output = out2.view();
  layer.run_masked(m);  // counts all 0: every row zero
  for (int64_t i = 0; i < out2.numel(); ++i) ASSERT_EQ(out2.data<uint16_t>()[i], 0u);
}

TEST(MaskedLayout, BadArgumentsAreNamed) {
  LayerFile lf = make_layer(Format::FP8_BLOCK, Activation::SILU, 3, 256, 128, 23, false);
  Layer layer(lf.config, lf.weights(), LayerOptions{Backend::CPU});
  HostTensor x(DType::BF16, {3, 4, 256}), out(DType::BF16, {3, 4, 256}), cnt(DType::I32, {3});
  const Quantised q = quantise_groups(x, false);
  auto good = [&] {
    MaskedArgs m;
    m.hidden_states = x.view();
    m.expert_num_tokens = cnt.view();
    m.output = out.view();
    return m;
  };
  EXPECT_NO_THROW(layer.run_masked(good()));
  expect_invalid([&] { MaskedArgs m = good(); m.hidden_states.shape[0] = 2; layer.run_masked(m); }, "hidden_states");
  expect_invalid([&] { MaskedArgs m = good(); m.hidden_states = TensorView::contiguous(x.bytes.data(), DType::BF16, {12, 256}); layer.run_masked(m); }, "hidden_states");
  expect_invalid([&] { MaskedArgs m = good(); m.hidden_states.dtype = DType::I32; layer.run_masked(m); }, "hidden_states");
  expect_invalid([&] { MaskedArgs m = good(); m.expert_num_tokens = {}; layer.run_masked(m); }, "expert_num_tokens");
  expect_invalid([&] { MaskedArgs m = good(); m.expert_num_tokens.shape[0] = 4; layer.run_masked(m); }, "expert_num_tokens");
  expect_invalid([&] { MaskedArgs m = good(); m.expert_num_tokens.dtype = DType::I64; layer.run_masked(m); }, "expert_num_tokens");
  expect_invalid([&] { MaskedArgs m = good(); m.output.shape[1] = 3; layer.run_masked(m); }, "output");
  expect_invalid([&] { MaskedArgs m = good(); m.output.dtype = DType::F32; layer.run_masked(m); }, "output");
  expect_invalid([&] { MaskedArgs m = good(); m.output.data = x.bytes.data(); layer.run_masked(m); }, "output");
  expect_invalid([&] { MaskedArgs m = good(); m.hidden_states_scale = q.scales.view(); layer.run_masked(m); }, "hidden_states_scale");
  // Pre-quantised: scales [E, T, K/128] required; any float output dtype.
  auto preq = [&] {
    MaskedArgs m = good();
    m.hidden_states = q.codes.view();
    m.hidden_states_scale = q.scales.view();
    return m;
  };
  EXPECT_NO_THROW(layer.run_masked(preq()));
  HostTensor out32(DType::F32, {3, 4, 256});
  EXPECT_NO_THROW({ MaskedArgs m = preq(); m.output = out32.view(); layer.run_masked(m); });
  expect_invalid([&] { MaskedArgs m = preq(); m.hidden_states_scale = {}; layer.run_masked(m); }, "hidden_states_scale");
  expect_invalid([&] { MaskedArgs m = preq(); m.hidden_states_scale.shape[1] = 5; layer.run_masked(m); }, "hidden_states_scale");
  expect_invalid([&] { MaskedArgs m = preq(); m.output.dtype = DType::U8; layer.run_masked(m); }, "output");
  EXPECT_THROW(layer.masked_workspace_size(-1), InvalidArgument);
}

// ---------------------------------------------------------------- C: warm-up

TEST(Warmup, CpuIsANoOpAndChecksItsArguments) {
  LayerFile lf = make_layer(Format::BF16, Activation::SILU, 4, 64, 32, 24, false);
  Layer layer(lf.config, lf.weights(), LayerOptions{Backend::CPU});
  EXPECT_NO_THROW(layer.warmup(128, 2, nullptr));
  EXPECT_NO_THROW(layer.warmup(0, 1, nullptr));
  expect_invalid([&] { layer.warmup(-1, 2, nullptr); }, "max_tokens");
  expect_invalid([&] { layer.warmup(8, 0, nullptr); }, "topk");
  const Inputs in = random_inputs(5, 64, 2, 4, DType::BF16, 9);
  EXPECT_TRUE(bitwise_equal(run_layer(lf, in, CpuPrecision::FAST), run_layer(lf, in, CpuPrecision::FAST)));
}

}  // namespace
}  // namespace fusedmoe::test
