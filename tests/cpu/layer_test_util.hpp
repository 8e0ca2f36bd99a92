#pragma once
// Shared helpers of the CPU layer tests: random inputs, running a layer, comparing outputs.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "fusedmoe/fusedmoe.hpp"
#include "fusedmoe/layer_builder.hpp"

namespace fusedmoe::test {

struct Inputs {
  HostTensor hidden, ids, weights, expert_map;
  bool has_map = false;
  bool on_input = false;
};

// Random hidden states (never zero), random distinct ids per token, random positive weights.
inline Inputs random_inputs(int64_t M, int64_t K, int64_t topk, int64_t num_ids, DType dtype, uint64_t seed,
                            float x_std = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, x_std);
  std::uniform_real_distribution<float> ud(0.1f, 1.0f);
  Inputs in;
  in.hidden = HostTensor(dtype, {M, K});
  for (int64_t i = 0; i < M * K; ++i) {
    const float v = nd(rng);
    if (dtype == DType::F32) in.hidden.data<float>()[i] = v;
    else if (dtype == DType::BF16) in.hidden.data<uint16_t>()[i] = float_to_bf16_bits(v);
    else in.hidden.data<uint16_t>()[i] = float_to_fp16_bits(v);
  }
  in.ids = HostTensor(DType::I32, {M, topk});
  in.weights = HostTensor(DType::F32, {M, topk});
  std::vector<int32_t> perm(static_cast<size_t>(num_ids));
  for (int64_t t = 0; t < M; ++t) {
    for (int64_t e = 0; e < num_ids; ++e) perm[e] = static_cast<int32_t>(e);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t k = 0; k < topk; ++k) {
      in.ids.data<int32_t>()[t * topk + k] = perm[k % num_ids];
      in.weights.data<float>()[t * topk + k] = ud(rng);
    }
  }
  return in;
}

inline RunArgs make_args(const Inputs& in, HostTensor& out) {
  RunArgs a;
  a.hidden_states = in.hidden.view();
  a.topk_ids = in.ids.view();
  a.topk_weights = in.weights.view();
  if (in.has_map) a.expert_map = in.expert_map.view();
  a.output = out.view();
  a.apply_router_weight_on_input = in.on_input;
  return a;
}

inline HostTensor run_layer(const LayerFile& lf, const Inputs& in, CpuPrecision prec, int threads = 0) {
  Layer layer(lf.config, lf.weights(), LayerOptions{Backend::CPU, threads, prec});
  HostTensor out(in.hidden.dtype, in.hidden.shape);
  // Poison: every element must be written.
  if (!out.bytes.empty()) std::memset(out.bytes.data(), 0xFF, out.bytes.size());
  layer.run(make_args(in, out));
  return out;
}

inline std::vector<double> to_double(const HostTensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.dtype == DType::F32) v[i] = t.data<float>()[i];
    else if (t.dtype == DType::BF16) v[i] = bf16_bits_to_float(t.data<uint16_t>()[i]);
    else v[i] = fp16_bits_to_float(t.data<uint16_t>()[i]);
  }
  return v;
}

// Relative Frobenius error; NaN anywhere gives +inf (never passes).
inline double rel_error(const std::vector<double>& a, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(ref[i])) return INFINITY;
    num += (a[i] - ref[i]) * (a[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den == 0 ? (num == 0 ? 0 : INFINITY) : std::sqrt(num / den);
}

inline bool bitwise_equal(const HostTensor& a, const HostTensor& b) {
  return a.bytes.size() == b.bytes.size() &&
         (a.bytes.empty() || std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size()) == 0);
}

}  // namespace fusedmoe::test
