#include "synth.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "fusedmoe/codecs.hpp"
#include "fusedmoe/error.hpp"

namespace fusedmoe::cli {
namespace {

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// fp8-tensor input scales are one per layer ([1]); every other tensor has the expert first.
bool per_layer(Format f, const std::string& name) {
  return f == Format::FP8_TENSOR && (name == "w13_input_scale" || name == "w2_input_scale");
}

void place(LayerFile& out, const LayerFile& one, int64_t e) {
  for (const auto& [name, t] : one.tensors) {
    if (per_layer(out.config.format, name)) continue;
    HostTensor& dst = out.tensors.at(name);
    if (dst.bytes.size() != t.bytes.size() * static_cast<size_t>(out.num_experts))
      throw Error("internal: expert tensor '" + name + "' does not stack");
    std::memcpy(dst.bytes.data() + static_cast<size_t>(e) * t.bytes.size(), t.bytes.data(), t.bytes.size());
  }
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

LayerFile build_by_expert(const LayerConfig& float_config, int64_t E, int64_t K, int64_t N,
                          const QuantizeOptions& options, const ExpertSource& source, const ExpertHook& hook,
                          int threads, Progress& progress) {
  FloatLayer proto;
  proto.config = float_config;
  proto.num_experts = 1;
  proto.hidden = K;
  proto.inter = N;
  QuantizeOptions q = options;
  q.threads = 1;  // we parallelise over experts ourselves
  q.progress = nullptr;
  auto encode = [&](int64_t e) {
    FloatLayer one = proto;
    source(e, one);
    if (hook) hook(e, one);
    return quantize_layer(one, q);
  };

  // Expert 0 alone first: its tensors give the stacked shapes, allocated once.
  const LayerFile first = encode(0);
  LayerFile out;
  out.config = first.config;
  out.num_experts = E;
  out.hidden = first.hidden;
  out.inter = first.inter;
  for (const auto& [name, t] : first.tensors) {
    if (per_layer(first.config.format, name)) {
      out.tensors[name] = t;
      continue;
    }
    std::vector<int64_t> shape = t.shape;
    if (shape.empty() || shape[0] != 1) throw Error("internal: tensor '" + name + "' of one expert is not [1,...]");
    shape[0] = E;
    out.tensors[name] = HostTensor(t.dtype, shape);
  }
  place(out, first, 0);
  progress.done_one();

  std::atomic<int64_t> next{1};
  std::atomic<bool> stop{false};
  std::exception_ptr error;
  std::mutex mu;
  auto work = [&] {
    while (!stop) {
      const int64_t e = next++;
      if (e >= E) return;
      try {
        place(out, encode(e), e);  // disjoint byte ranges: no lock needed
        progress.done_one();
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        stop = true;
      }
    }
  };
  const int n = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int i = 0; i < std::min<int64_t>(n, E - 1); ++i) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  return out;
}

void random_normal_bf16(uint64_t seed, uint64_t stream, float std, float* out, int64_t n) {
  uint64_t s = seed * 0xD1B54A32D192ED03ull ^ (stream + 1) * 0x9E3779B97F4A7C15ull;
  splitmix64(s);
  // Irwin-Hall: the sum of 4 uniforms on [-1/2, 1/2] has variance 1/3; cheap and close enough
  // to normal for synthetic weights (this runs over tens of billions of values).
  const float k = std * std::sqrt(3.0f) / 65535.0f;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = splitmix64(s);
    const int64_t sum = static_cast<int64_t>(r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48);
    out[i] = round_bf16(static_cast<float>(sum - 2 * 65535) * k);
  }
}

void random_expert(uint64_t seed, int64_t e, bool bias, FloatLayer& one) {
  const int64_t K = one.hidden, N = one.inter, R = one.w13_rows();
  one.w13.resize(static_cast<size_t>(R * K));
  one.w2.resize(static_cast<size_t>(K * N));
  const uint64_t base = static_cast<uint64_t>(e) * 4;
  random_normal_bf16(seed, base, 1.0f / std::sqrt(static_cast<float>(K)), one.w13.data(), R * K);
  random_normal_bf16(seed, base + 1, 1.0f / std::sqrt(static_cast<float>(N)), one.w2.data(), K * N);
  if (bias) {
    one.w13_bias.resize(static_cast<size_t>(R));
    one.w2_bias.resize(static_cast<size_t>(K));
    random_normal_bf16(seed, base + 2, 0.1f, one.w13_bias.data(), R);
    random_normal_bf16(seed, base + 3, 0.1f, one.w2_bias.data(), K);
  } else {
    one.w13_bias.clear();
    one.w2_bias.clear();
  }
}

void expert_activation(const FloatLayer& one, const float* x, float* a) {
  const LayerConfig& c = one.config;
  const int64_t K = one.hidden, N = one.inter, R = one.w13_rows();
  std::vector<float> h(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) {
    const float* w = one.w13.data() + r * K;
    double acc = one.w13_bias.empty() ? 0.0 : one.w13_bias[r];
    for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(w[k]) * x[k];
    h[r] = static_cast<float>(acc);
  }
  for (int64_t j = 0; j < N; ++j) {
    if (c.activation == Activation::RELU2) {
      const float v = std::max(h[j], 0.0f);
      a[j] = v * v;
      continue;
    }
    // Which rows hold the gate and the up value of unit j (vLLM [gate; up], FlashInfer [up; gate],
    // or interleaved pairs, gate first unless the order says up first).
    const bool up_first = c.gate_up_order == GateUpOrder::UP_GATE;
    const int64_t first = c.interleaved ? 2 * j : j, second = c.interleaved ? 2 * j + 1 : N + j;
    float g = h[up_first ? second : first], u = h[up_first ? first : second];
    switch (c.activation) {
      case Activation::SILU: a[j] = g * sigmoid(g) * u; break;
      case Activation::GELU: a[j] = 0.5f * g * (1.0f + std::erf(g / std::sqrt(2.0f))) * u; break;
      case Activation::GELU_TANH:
        a[j] = 0.5f * g * (1.0f + std::tanh(0.7978845608f * (g + 0.044715f * g * g * g))) * u;
        break;
      case Activation::SWIGLUOAI: {
        const float L = c.swiglu_limit;
        g = std::min(g, L);
        u = std::clamp(u, -L, L);
        a[j] = (u + 1.0f) * g * sigmoid(c.swiglu_alpha * g);
        break;
      }
      case Activation::RELU2: break;
    }
  }
}

double layer_bytes(Format f, int64_t E, int64_t K, int64_t N, bool gated, bool bias) {
  const double R = gated ? 2.0 * N : N, w = E * (R * K + static_cast<double>(K) * N);
  double b = 0;
  switch (f) {
    case Format::FP32: b = 4 * w; break;
    case Format::BF16: case Format::FP16: b = 2 * w; break;
    case Format::FP8_TENSOR: b = w; break;
    case Format::FP8_CHANNEL: b = w + 4.0 * E * (R + K); break;
    case Format::FP8_BLOCK: b = w + 4 * w / (128 * 128); break;
    case Format::W4A8_INT4: b = w / 2 + 2 * w / 128; break;
    case Format::MXFP4: b = w / 2 + w / 32; break;
    case Format::NVFP4: b = w / 2 + w / 16; break;
  }
  return b + (bias ? 4.0 * E * (R + K) : 0.0);
}

}  // namespace fusedmoe::cli
