// The float64 oracle against an independent brute-force evaluation of SEMANTICS.md on tiny
// problems, and the fast fp32 CPU path against the oracle for every format x activation.
#include <gtest/gtest.h>

#include <cmath>

#include "layer_test_util.hpp"

namespace fusedmoe::test {
namespace {

double act_ref(const LayerConfig& c, double g, double u) {
  switch (c.activation) {
    case Activation::SILU: return g / (1 + std::exp(-g)) * u;
    case Activation::GELU: return 0.5 * g * (1 + std::erf(g / std::sqrt(2.0))) * u;
    case Activation::GELU_TANH:
      return 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g))) * u;
    case Activation::SWIGLUOAI: {
      const double L = c.swiglu_limit;
      g = std::min(g, L);
      u = std::max(-L, std::min(u, L));
      return (u + 1) * g / (1 + std::exp(-double(c.swiglu_alpha) * g));
    }
    case Activation::RELU2: return 0;
  }
  return 0;
}

// Straight from SEMANTICS.md, one token and one slot at a time, for unquantised bf16/fp32 layers.
std::vector<double> brute_force(const FloatLayer& l, DType wdt, const Inputs& in, int64_t M, int64_t topk) {
  const auto& c = l.config;
  const int64_t K = l.hidden, N = l.inter, R = l.w13_rows(), E = l.num_experts;
  auto rw = [&](double v) { return wdt == DType::BF16 ? double(round_bf16(float(v))) : double(float(v)); };
  auto x_at = [&](int64_t i) {
    return in.hidden.dtype == DType::F32 ? double(in.hidden.data<float>()[i])
                                         : double(bf16_bits_to_float(in.hidden.data<uint16_t>()[i]));
  };
  std::vector<double> out(static_cast<size_t>(M * K), 0.0);
  for (int64_t t = 0; t < M; ++t) {
    std::vector<double> acc(static_cast<size_t>(K), 0.0);
    for (int64_t k = 0; k < topk; ++k) {
      int64_t e = in.ids.data<int32_t>()[t * topk + k];
      if (in.has_map) e = (e >= 0 && e < in.expert_map.numel()) ? in.expert_map.data<int32_t>()[e] : -1;
      if (e < 0 || e >= E) continue;
      const double w = in.weights.data<float>()[t * topk + k];
      std::vector<double> x(static_cast<size_t>(K)), h(static_cast<size_t>(R)), a(static_cast<size_t>(N));
      for (int64_t i = 0; i < K; ++i) {
        double v = x_at(t * K + i);
        if (in.on_input) v = rw(v * w);  // rounded to the activation (= weight) dtype
        x[i] = rw(v);
      }
      for (int64_t j = 0; j < R; ++j) {
        double s = l.w13_bias.empty() ? 0 : l.w13_bias[e * R + j];
        for (int64_t i = 0; i < K; ++i) s += x[i] * rw(l.w13[(e * R + j) * K + i]);
        h[j] = s;
      }
      for (int64_t n = 0; n < N; ++n) {
        double v;
        if (c.activation == Activation::RELU2) {
          v = h[n] > 0 ? h[n] * h[n] : 0;
        } else {
          const bool gf = c.gate_up_order == GateUpOrder::GATE_UP;
          const int64_t gi = c.interleaved ? 2 * n + (gf ? 0 : 1) : (gf ? n : N + n);
          const int64_t ui = c.interleaved ? 2 * n + (gf ? 1 : 0) : (gf ? N + n : n);
          v = act_ref(c, h[gi], h[ui]);
        }
        a[n] = rw(v);
      }
      for (int64_t i = 0; i < K; ++i) {
        double s = l.w2_bias.empty() ? 0 : l.w2_bias[e * K + i];
        for (int64_t n = 0; n < N; ++n) s += a[n] * rw(l.w2[(e * K + i) * N + n]);
        acc[i] += (in.on_input ? 1.0 : w) * s;
      }
    }
    for (int64_t i = 0; i < K; ++i) out[t * K + i] = acc[i];
  }
  return out;
}

struct ActCase {
  Activation act;
  GateUpOrder order;
  bool interleaved;
};

const ActCase kActs[] = {
    {Activation::SILU, GateUpOrder::GATE_UP, false},      {Activation::SILU, GateUpOrder::UP_GATE, false},
    {Activation::GELU, GateUpOrder::GATE_UP, false},      {Activation::GELU_TANH, GateUpOrder::UP_GATE, false},
    {Activation::RELU2, GateUpOrder::GATE_UP, false},     {Activation::SWIGLUOAI, GateUpOrder::GATE_UP, false},
    {Activation::SWIGLUOAI, GateUpOrder::GATE_UP, true},  {Activation::SWIGLUOAI, GateUpOrder::UP_GATE, true},
};

TEST(LayerOracle, MatchesBruteForceOnTinyProblems) {
  int seed = 1;
  for (const ActCase& ac : kActs) {
    for (DType dt : {DType::F32, DType::BF16}) {
      for (int variant = 0; variant < 4; ++variant) {
        LayerConfig c;
        c.activation = ac.act;
        c.gate_up_order = ac.order;
        c.interleaved = ac.interleaved;
        c.swiglu_limit = 1.5f;  // small enough that the clamps are exercised
        const int64_t E = 3, K = 7, N = 5, M = 6, topk = 2;
        const bool bias = variant & 1;
        FloatLayer fl = random_float_layer(c, E, K, N, ++seed, bias, 0.5f);
        QuantizeOptions qo;
        qo.format = dt == DType::F32 ? Format::FP32 : Format::BF16;
        LayerFile lf = quantize_layer(fl, qo);
        Inputs in = random_inputs(M, K, topk, variant >= 2 ? 5 : E, dt, seed);
        in.on_input = variant == 1 || variant == 3;
        if (variant >= 2) {  // expert_map over 5 global ids, 3 local experts, one id unmapped
          in.has_map = true;
          in.expert_map = HostTensor(DType::I32, {5});
          const int32_t map[5] = {2, -1, 0, 1, -1};
          std::memcpy(in.expert_map.data<int32_t>(), map, sizeof(map));
        }
        const auto ref = brute_force(fl, dt, in, M, topk);
        const auto got = to_double(run_layer(lf, in, CpuPrecision::ORACLE_FP64));
        // The oracle differs from the brute force only by the final rounding to the output dtype.
        const double tol = dt == DType::F32 ? 1e-6 : 4e-3;
        EXPECT_LT(rel_error(got, ref), tol) << activation_name(ac.act) << " " << dtype_name(dt) << " variant " << variant;
      }
    }
  }
}

struct FormatCase {
  Format format;
  ActDtype act;
  double tol_fast;   // fast fp32 path vs the oracle
  double tol_float;  // oracle vs the unquantised float layer (quantisation error)
};

const FormatCase kFormats[] = {
    {Format::FP32, ActDtype::BF16, 1e-5, 1e-5},        {Format::BF16, ActDtype::BF16, 1e-2, 2e-2},
    {Format::FP16, ActDtype::BF16, 1e-2, 1e-2},        {Format::FP8_TENSOR, ActDtype::BF16, 3e-2, 8e-2},
    {Format::FP8_CHANNEL, ActDtype::BF16, 3e-2, 8e-2}, {Format::FP8_BLOCK, ActDtype::BF16, 3e-2, 8e-2},
    {Format::W4A8_INT4, ActDtype::BF16, 3e-2, 2.5e-1}, {Format::MXFP4, ActDtype::BF16, 3e-2, 2.5e-1},
    {Format::MXFP4, ActDtype::FP8, 3e-2, 2.5e-1},      {Format::NVFP4, ActDtype::BF16, 3e-2, 2.5e-1},
    {Format::NVFP4, ActDtype::NVFP4, 5e-2, 3e-1},
};

TEST(LayerCpu, EveryFormatAndActivationAgreesWithOracle) {
  int seed = 100;
  for (const FormatCase& fc : kFormats) {
    for (const ActCase& ac : kActs) {
      LayerConfig c;
      c.activation = ac.act;
      c.gate_up_order = ac.order;
      c.interleaved = ac.interleaved;
      const int64_t E = 4, K = 256, N = 128, M = 9, topk = 2;
      FloatLayer fl = random_float_layer(c, E, K, N, ++seed, ac.act == Activation::SWIGLUOAI, 0.06f);
      QuantizeOptions qo;
      qo.format = fc.format;
      qo.act_dtype = fc.act;
      qo.nvfp4_w13_act_amax = 16.0f;
      qo.nvfp4_w2_act_amax = 16.0f;
      LayerFile lf = quantize_layer(fl, qo);
      QuantizeOptions fo;
      fo.format = Format::FP32;
      LayerFile ff = quantize_layer(fl, fo);
      const DType xdt = fc.format == Format::FP32 ? DType::F32 : fc.format == Format::FP16 ? DType::F16 : DType::BF16;
      Inputs in = random_inputs(M, K, topk, E, xdt, seed);
      const auto oracle = to_double(run_layer(lf, in, CpuPrecision::ORACLE_FP64));
      const auto fast = to_double(run_layer(lf, in, CpuPrecision::FAST));
      const auto unq = to_double(run_layer(ff, in, CpuPrecision::ORACLE_FP64));
      const std::string what = std::string(format_name(fc.format)) + "/" + act_dtype_name(fc.act) + " " +
                               activation_name(ac.act) + (ac.interleaved ? " interleaved" : "");
      EXPECT_LT(rel_error(fast, oracle), fc.tol_fast) << what;
      EXPECT_LT(rel_error(oracle, unq), fc.tol_float) << what;
    }
  }
}

}  // namespace
}  // namespace fusedmoe::test
