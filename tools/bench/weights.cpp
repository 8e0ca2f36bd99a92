#include "weights.hpp"

#include <cmath>
#include <cstring>
#include <sstream>

#include "gen_host.hpp"
#include "kernels.hpp"
#include "routing.hpp"

namespace fmbench {

using fusedmoe::ActDtype;
using fusedmoe::DeviceType;
using fusedmoe::DType;
using fusedmoe::Format;
using fusedmoe::LayerWeights;
using fusedmoe::TensorView;

namespace {

// rms of a uniformly random e2m1 code (magnitudes 0 .5 1 1.5 2 3 4 6 equally likely).
constexpr double kE2m1Rms = 2.926;  // sqrt(68.5 / 8)
// rms of a uniformly random signed int4 in [-8, 7].
constexpr double kInt4Rms = 4.637;  // sqrt(344 / 16)

// Where the data goes: the GPU (kernels on `stream`) or host memory (--self-test).
struct Gen {
  bool host = false;
  cudaStream_t stream = nullptr;
  void uniform(void* out, DType dt, size_t n, uint64_t seed, float lo, float hi) const {
    if (host) gen_uniform_host(out, dt, n, seed, lo, hi);
    else gen_uniform(out, dt, n, seed, lo, hi, stream);
  }
  void bytes(uint8_t* out, size_t n, uint64_t seed) const {
    if (host) gen_bytes_host(out, n, seed);
    else gen_bytes(out, n, seed, stream);
  }
  void e8m0(uint8_t* out, size_t n, uint64_t seed, int base, int spread) const {
    if (host) gen_e8m0_host(out, n, seed, base, spread);
    else gen_e8m0(out, n, seed, base, spread, stream);
  }
};

OwnedTensor* add_tensor(DeviceWeights& dw, const char* name, TensorView LayerWeights::*member, DType dt,
                        std::initializer_list<int64_t> shape, bool per_expert, int device, bool host) {
  auto t = std::make_unique<OwnedTensor>();
  t->name = name;
  t->member = member;
  t->per_expert = per_expert;
  size_t n = 1;
  for (int64_t s : shape) n *= static_cast<size_t>(s);
  void* data = nullptr;
  if (host) {
    t->host_buffer.resize(n * fusedmoe::dtype_size(dt));
    data = t->host_buffer.data();
  } else {
    t->buffer.alloc(n * fusedmoe::dtype_size(dt));
    data = t->buffer.get();
  }
  t->view = TensorView::contiguous(data, dt, shape, host ? DeviceType::CPU : DeviceType::CUDA, host ? 0 : device);
  dw.weights.*member = t->view;
  dw.tensors.push_back(std::move(t));
  return dw.tensors.back().get();
}

size_t numel(const OwnedTensor* t) { return static_cast<size_t>(t->view.numel()); }
uint8_t* bytes_of(OwnedTensor* t) { return static_cast<uint8_t*>(t->view.data); }

}  // namespace

std::unique_ptr<DeviceWeights> make_device_weights(const Shape& shape, const FormatVariant& fv,
                                                   const WeightGenOptions& opt, cudaStream_t stream) {
  auto dw = std::make_unique<DeviceWeights>();
  DeviceWeights& d = *dw;
  d.config.format = fv.format;
  d.config.act_dtype = fv.act_dtype;
  d.config.activation = shape.activation;
  d.config.interleaved = shape.interleaved;
  d.E = shape.local_experts();
  d.K = shape.K;
  d.N = shape.N;
  d.R = shape.w13_rows();
  const int64_t E = d.E, K = d.K, N = d.N, R = d.R;
  const int dev = opt.device;
  const bool host = opt.host;
  Gen gen;
  gen.host = host;
  gen.stream = stream;
  auto seed_for = [&](const char* name) {
    return hash_combine(opt.seed, hash_string(shape.name + "/" + fv.name + "/" + name));
  };

  // Dequantised weights are drawn with rms b/sqrt(3), b = 3/sqrt(fan-in): with hidden states
  // uniform in [-1, 1) every GEMM1 output has variance ~1, so activations and outputs are O(1).
  const double b1 = 3.0 / std::sqrt(static_cast<double>(K));
  const double b2 = 3.0 / std::sqrt(static_cast<double>(N));
  const double rms1 = b1 / std::sqrt(3.0), rms2 = b2 / std::sqrt(3.0);
  std::ostringstream note;

  OwnedTensor *w13 = nullptr, *w2 = nullptr;
  switch (fv.format) {
    case Format::BF16:
    case Format::FP16:
    case Format::FP32: {
      const DType dt = fv.format == Format::BF16 ? DType::BF16 : fv.format == Format::FP16 ? DType::F16 : DType::F32;
      w13 = add_tensor(d, "w13_weight", &LayerWeights::w13_weight, dt, {E, R, K}, true, dev, host);
      w2 = add_tensor(d, "w2_weight", &LayerWeights::w2_weight, dt, {E, K, N}, true, dev, host);
      gen.uniform(w13->view.data, dt, numel(w13), seed_for("w13"), static_cast<float>(-b1), static_cast<float>(b1));
      gen.uniform(w2->view.data, dt, numel(w2), seed_for("w2"), static_cast<float>(-b2), static_cast<float>(b2));
      note << "weights U(-b,b), b=3/sqrt(fan-in)";
      break;
    }
    case Format::FP8_TENSOR:
    case Format::FP8_CHANNEL:
    case Format::FP8_BLOCK: {
      w13 = add_tensor(d, "w13_weight", &LayerWeights::w13_weight, DType::F8_E4M3, {E, R, K}, true, dev, host);
      w2 = add_tensor(d, "w2_weight", &LayerWeights::w2_weight, DType::F8_E4M3, {E, K, N}, true, dev, host);
      gen.uniform(w13->view.data, DType::F8_E4M3, numel(w13), seed_for("w13"), -448.f, 448.f);
      gen.uniform(w2->view.data, DType::F8_E4M3, numel(w2), seed_for("w2"), -448.f, 448.f);
      OwnedTensor *s13 = nullptr, *s2 = nullptr;
      float jitter = 0.5f;
      if (fv.format == Format::FP8_TENSOR) {
        s13 = add_tensor(d, "w13_weight_scale", &LayerWeights::w13_weight_scale, DType::F32, {E}, true, dev, host);
        s2 = add_tensor(d, "w2_weight_scale", &LayerWeights::w2_weight_scale, DType::F32, {E}, true, dev, host);
        jitter = 0.25f;
      } else if (fv.format == Format::FP8_CHANNEL) {
        s13 = add_tensor(d, "w13_weight_scale", &LayerWeights::w13_weight_scale, DType::F32, {E, R}, true, dev, host);
        s2 = add_tensor(d, "w2_weight_scale", &LayerWeights::w2_weight_scale, DType::F32, {E, K}, true, dev, host);
      } else {
        s13 = add_tensor(d, "w13_weight_scale", &LayerWeights::w13_weight_scale, DType::F32,
                         {E, ceil_div(R, 128), ceil_div(K, 128)}, true, dev, host);
        s2 = add_tensor(d, "w2_weight_scale", &LayerWeights::w2_weight_scale, DType::F32,
                        {E, ceil_div(K, 128), ceil_div(N, 128)}, true, dev, host);
      }
      const float c1 = static_cast<float>(b1 / 448.0), c2 = static_cast<float>(b2 / 448.0);
      gen.uniform(s13->view.data, DType::F32, numel(s13), seed_for("s13"), c1 * (1 - jitter), c1 * (1 + jitter));
      gen.uniform(s2->view.data, DType::F32, numel(s2), seed_for("s2"), c2 * (1 - jitter), c2 * (1 + jitter));
      note << "e4m3 codes of U(-448,448), fp32 scales ~ b/448";
      if (fv.format == Format::FP8_TENSOR) {
        if (opt.fp8_act_scale == Fp8ActScale::STATIC) {
          OwnedTensor* i13 = add_tensor(d, "w13_input_scale", &LayerWeights::w13_input_scale, DType::F32, {1}, false, dev, host);
          OwnedTensor* i2 = add_tensor(d, "w2_input_scale", &LayerWeights::w2_input_scale, DType::F32, {1}, false, dev, host);
          const float v13 = 1.0f / 448.0f, v2 = opt.gemm2_input_range / 448.0f;
          gen.uniform(i13->view.data, DType::F32, 1, 0, v13, v13);
          gen.uniform(i2->view.data, DType::F32, 1, 0, v2, v2);
          note << "; static activation scales 1/448 and " << opt.gemm2_input_range << "/448";
        } else {
          note << "; dynamic per-tensor activation scales (the sampled oracle check sees the sample's GEMM2 amax)";
        }
      }
      break;
    }
    case Format::W4A8_INT4: {
      w13 = add_tensor(d, "w13_weight", &LayerWeights::w13_weight, DType::U8, {E, R, K / 2}, true, dev, host);
      w2 = add_tensor(d, "w2_weight", &LayerWeights::w2_weight, DType::U8, {E, K, N / 2}, true, dev, host);
      gen.bytes(bytes_of(w13), numel(w13), seed_for("w13"));
      gen.bytes(bytes_of(w2), numel(w2), seed_for("w2"));
      OwnedTensor* s13 = add_tensor(d, "w13_weight_scale", &LayerWeights::w13_weight_scale, DType::BF16,
                                    {E, R, K / fusedmoe::kW4A8GroupSize}, true, dev, host);
      OwnedTensor* s2 = add_tensor(d, "w2_weight_scale", &LayerWeights::w2_weight_scale, DType::BF16,
                                   {E, K, N / fusedmoe::kW4A8GroupSize}, true, dev, host);
      const float c1 = static_cast<float>(rms1 / kInt4Rms), c2 = static_cast<float>(rms2 / kInt4Rms);
      gen.uniform(s13->view.data, DType::BF16, numel(s13), seed_for("s13"), c1 * 0.75f, c1 * 1.25f);
      gen.uniform(s2->view.data, DType::BF16, numel(s2), seed_for("s2"), c2 * 0.75f, c2 * 1.25f);
      note << "random signed int4, bf16 group scales";
      break;
    }
    case Format::MXFP4:
    case Format::NVFP4: {
      const bool mx = fv.format == Format::MXFP4;
      const int64_t bs = mx ? fusedmoe::kMxfp4BlockSize : fusedmoe::kNvfp4BlockSize;
      w13 = add_tensor(d, "w13_weight", &LayerWeights::w13_weight, DType::U8, {E, R, K / 2}, true, dev, host);
      w2 = add_tensor(d, "w2_weight", &LayerWeights::w2_weight, DType::U8, {E, K, N / 2}, true, dev, host);
      gen.bytes(bytes_of(w13), numel(w13), seed_for("w13"));
      gen.bytes(bytes_of(w2), numel(w2), seed_for("w2"));
      const DType sdt = mx ? DType::U8 : DType::F8_E4M3;
      OwnedTensor* s13 = add_tensor(d, "w13_weight_scale", &LayerWeights::w13_weight_scale, sdt, {E, R, K / bs}, true, dev, host);
      OwnedTensor* s2 = add_tensor(d, "w2_weight_scale", &LayerWeights::w2_weight_scale, sdt, {E, K, N / bs}, true, dev, host);
      if (mx) {
        // 2^e ~ rms / rms(e2m1), e +-1.
        const int e1 = static_cast<int>(std::lround(std::log2(rms1 / kE2m1Rms)));
        const int e2 = static_cast<int>(std::lround(std::log2(rms2 / kE2m1Rms)));
        gen.e8m0(bytes_of(s13), numel(s13), seed_for("s13"), 127 + e1, 1);
        gen.e8m0(bytes_of(s2), numel(s2), seed_for("s2"), 127 + e2, 1);
        note << "random e2m1 codes, e8m0 block-32 scales";
      } else {
        // Block scales e4m3 in [128, 384); per-expert global factor scale_2 brings the rms to b/sqrt(3).
        gen.uniform(s13->view.data, DType::F8_E4M3, numel(s13), seed_for("s13"), 128.f, 384.f);
        gen.uniform(s2->view.data, DType::F8_E4M3, numel(s2), seed_for("s2"), 128.f, 384.f);
        OwnedTensor* g13 = add_tensor(d, "w13_weight_scale_2", &LayerWeights::w13_weight_scale_2, DType::F32, {E}, true, dev, host);
        OwnedTensor* g2 = add_tensor(d, "w2_weight_scale_2", &LayerWeights::w2_weight_scale_2, DType::F32, {E}, true, dev, host);
        const float c1 = static_cast<float>(rms1 / (kE2m1Rms * 256.0)), c2 = static_cast<float>(rms2 / (kE2m1Rms * 256.0));
        gen.uniform(g13->view.data, DType::F32, E, seed_for("g13"), c1 * 0.75f, c1 * 1.25f);
        gen.uniform(g2->view.data, DType::F32, E, seed_for("g2"), c2 * 0.75f, c2 * 1.25f);
        note << "random e2m1 codes, e4m3 block-16 scales, fp32 scale_2";
        if (fv.act_dtype == ActDtype::NVFP4) {
          // input_scale = 1/gs with gs = 448*6/amax: amax 1 for GEMM1's input, the configured range for GEMM2's.
          OwnedTensor* i13 = add_tensor(d, "w13_input_scale", &LayerWeights::w13_input_scale, DType::F32, {E}, true, dev, host);
          OwnedTensor* i2 = add_tensor(d, "w2_input_scale", &LayerWeights::w2_input_scale, DType::F32, {E}, true, dev, host);
          const float v13 = 1.0f / 2688.0f, v2 = opt.gemm2_input_range / 2688.0f;
          gen.uniform(i13->view.data, DType::F32, E, seed_for("i13"), v13, v13);
          gen.uniform(i2->view.data, DType::F32, E, seed_for("i2"), v2, v2);
          note << "; nvfp4 activation global scales for amax 1 and " << opt.gemm2_input_range;
        }
      }
      break;
    }
  }
  if (shape.bias) {
    OwnedTensor* b13 = add_tensor(d, "w13_bias", &LayerWeights::w13_bias, DType::F32, {E, R}, true, dev, host);
    OwnedTensor* bb2 = add_tensor(d, "w2_bias", &LayerWeights::w2_bias, DType::F32, {E, K}, true, dev, host);
    gen.uniform(b13->view.data, DType::F32, numel(b13), seed_for("b13"), -0.1f, 0.1f);
    gen.uniform(bb2->view.data, DType::F32, numel(bb2), seed_for("b2"), -0.1f, 0.1f);
    note << "; biases U(-0.1,0.1)";
  }
  if (!host) FMB_CUDA(cudaStreamSynchronize(stream));

  for (const auto& t : d.tensors) {
    const double bytes = static_cast<double>(t->view.nbytes());
    if (t->per_expert)
      d.bytes_per_expert += bytes / static_cast<double>(E);
    else
      d.shared_bytes += bytes;
  }
  d.note = note.str();
  return dw;
}

std::unique_ptr<HostWeights> copy_experts_to_host(const DeviceWeights& dw, const std::vector<int32_t>& experts,
                                                  HostExpertCache* cache) {
  auto hw = std::make_unique<HostWeights>();
  hw->E = static_cast<int64_t>(experts.size());
  const size_t ntensors = dw.tensors.size();
  for (size_t ti = 0; ti < ntensors; ++ti) {
    const TensorView& v = dw.tensors[ti]->view;
    std::array<int64_t, fusedmoe::kMaxDims> shape = v.shape;
    std::vector<uint8_t> host;
    if (dw.tensors[ti]->per_expert) {
      const size_t per = v.nbytes() / static_cast<size_t>(v.shape[0]);
      shape[0] = hw->E;
      host.resize(per * experts.size());
      for (size_t j = 0; j < experts.size(); ++j) {
        uint8_t* dst = host.data() + j * per;
        auto hit = cache ? cache->experts.find(experts[j]) : decltype(cache->experts)::iterator();
        if (cache && hit != cache->experts.end()) {
          std::memcpy(dst, hit->second[ti].data(), per);
        } else {
          const uint8_t* src = static_cast<const uint8_t*>(v.data) + per * static_cast<size_t>(experts[j]);
          if (v.device == DeviceType::CPU) std::memcpy(dst, src, per);
          else FMB_CUDA(cudaMemcpy(dst, src, per, cudaMemcpyDeviceToHost));
        }
      }
    } else {
      host.resize(v.nbytes());
      if (v.device == DeviceType::CPU) std::memcpy(host.data(), v.data, v.nbytes());
      else FMB_CUDA(cudaMemcpy(host.data(), v.data, v.nbytes(), cudaMemcpyDeviceToHost));
    }
    hw->store.push_back(std::move(host));
    hw->weights.*(dw.tensors[ti]->member) = TensorView::contiguous(hw->store.back().data(), v.dtype, shape.data(), v.ndim);
  }
  // Remember the experts this call copied, while the cache has room.
  if (cache) {
    for (size_t j = 0; j < experts.size(); ++j) {
      if (cache->experts.count(experts[j])) continue;
      std::vector<std::vector<uint8_t>> parts(ntensors);
      size_t total = 0;
      for (size_t ti = 0; ti < ntensors; ++ti) {
        if (!dw.tensors[ti]->per_expert) continue;
        const size_t per = dw.tensors[ti]->view.nbytes() / static_cast<size_t>(dw.tensors[ti]->view.shape[0]);
        const uint8_t* src = hw->store[ti].data() + j * per;
        parts[ti].assign(src, src + per);
        total += per;
      }
      if (cache->bytes + total > cache->cap_bytes) break;
      cache->bytes += total;
      cache->experts.emplace(experts[j], std::move(parts));
    }
  }
  return hw;
}

double weight_bytes_for(const DeviceWeights& dw, int64_t experts_hit) {
  return dw.bytes_per_expert * static_cast<double>(experts_hit) + dw.shared_bytes;
}

}  // namespace fmbench
