// Float layers -> any format, and back. The weight recipes (scale formulas) are documented in
// docs/FORMATS.md; they are the ones `fusedmoe quantize` uses.
#include "fusedmoe/layer_builder.hpp"

#include <algorithm>
#include <cmath>

#include "cpu/parallel.hpp"
#include "cpu/weight_rows.hpp"
#include "fusedmoe/error.hpp"
#include "fusedmoe/quantize.hpp"

namespace fusedmoe {
namespace {

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Approximately normal (sum of 4 uniforms, rescaled to unit variance): cheap and never zero-heavy.
void fill_normal(float* out, int64_t n, uint64_t seed, float std) {
  uint64_t s = seed;
  const float k = std * std::sqrt(3.0f);  // the sum of 4 uniforms on [-.5, .5] has variance 1/3
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = splitmix64(s);
    float acc = 0.0f;
    for (int j = 0; j < 4; ++j) acc += static_cast<float>((r >> (16 * j)) & 0xFFFF) / 65535.0f - 0.5f;
    out[i] = acc * k;
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Encodes one matrix [E, rows, cols] into `w` (and its scales) for the format.
void encode_matrix(const QuantizeOptions& o, const float* src, int64_t E, int64_t rows, int64_t cols,
                   const std::string& prefix, LayerFile& out) {
  const int64_t per = rows * cols;
  auto& t = out.tensors;
  const std::string wname = prefix + "_weight", sname = prefix + "_weight_scale";
  const int threads = cpu::resolve_threads(o.threads);
  switch (o.format) {
    case Format::BF16:
    case Format::FP16: {
      t[wname] = HostTensor(o.format == Format::BF16 ? DType::BF16 : DType::F16, {E, rows, cols});
      uint16_t* d = t[wname].data<uint16_t>();
      cpu::parallel_for(E, threads, [&](int64_t e) {
        for (int64_t i = e * per; i < (e + 1) * per; ++i)
          d[i] = o.format == Format::BF16 ? float_to_bf16_bits(src[i]) : float_to_fp16_bits(src[i]);
      });
      return;
    }
    case Format::FP32: {
      t[wname] = HostTensor(DType::F32, {E, rows, cols});
      std::copy(src, src + E * per, t[wname].data<float>());
      return;
    }
    case Format::FP8_TENSOR: {
      t[wname] = HostTensor(DType::F8_E4M3, {E, rows, cols});
      t[sname] = HostTensor(DType::F32, {E});
      cpu::parallel_for(E, threads, [&](int64_t e) {
        const float s = fp8_tensor_scale(src + e * per, per);
        t.at(sname).data<float>()[e] = s;
        quantize_fp8_with_scale(src + e * per, per, s, t.at(wname).data<uint8_t>() + e * per);
      });
      return;
    }
    case Format::FP8_CHANNEL: {
      t[wname] = HostTensor(DType::F8_E4M3, {E, rows, cols});
      t[sname] = HostTensor(DType::F32, {E, rows});
      cpu::parallel_for(E, threads, [&](int64_t e) {
        quantize_fp8_per_row(src + e * per, rows, cols, t.at(wname).data<uint8_t>() + e * per,
                             t.at(sname).data<float>() + e * rows);
      });
      return;
    }
    case Format::FP8_BLOCK: {
      const int64_t rb = ceil_div(rows, 128), cb = ceil_div(cols, 128);
      t[wname] = HostTensor(DType::F8_E4M3, {E, rows, cols});
      t[sname] = HostTensor(DType::F32, {E, rb, cb});
      cpu::parallel_for(E, threads, [&](int64_t e) {
        quantize_fp8_block_weight(src + e * per, rows, cols, t.at(wname).data<uint8_t>() + e * per,
                                  t.at(sname).data<float>() + e * rb * cb);
      });
      return;
    }
    case Format::W4A8_INT4: {
      const int64_t groups = cols / kW4A8GroupSize;
      t[wname] = HostTensor(DType::U8, {E, rows, cols / 2});
      t[sname] = HostTensor(DType::BF16, {E, rows, groups});
      cpu::parallel_for(E, threads, [&](int64_t e) {
        std::vector<int8_t> q(static_cast<size_t>(per));
        quantize_int4_group(src + e * per, rows, cols, kW4A8GroupSize, q.data(),
                            t.at(sname).data<uint16_t>() + e * rows * groups);
        pack_int4(q.data(), static_cast<size_t>(per), t.at(wname).data<uint8_t>() + e * per / 2);
      });
      return;
    }
    case Format::MXFP4: {
      t[wname] = HostTensor(DType::U8, {E, rows, cols / 2});
      t[sname] = HostTensor(DType::U8, {E, rows, cols / kMxfp4BlockSize});
      cpu::parallel_for(E, threads, [&](int64_t e) {
        quantize_mxfp4(src + e * per, rows, cols, o.mxfp4_rounding, t.at(wname).data<uint8_t>() + e * per / 2,
                       t.at(sname).data<uint8_t>() + e * per / kMxfp4BlockSize);
      });
      return;
    }
    case Format::NVFP4: {
      t[wname] = HostTensor(DType::U8, {E, rows, cols / 2});
      t[sname] = HostTensor(DType::F8_E4M3, {E, rows, cols / kNvfp4BlockSize});
      t[prefix + "_weight_scale_2"] = HostTensor(DType::F32, {E});
      cpu::parallel_for(E, threads, [&](int64_t e) {
        const float gs = nvfp4_global_scale(src + e * per, per);
        t.at(prefix + "_weight_scale_2").data<float>()[e] = 1.0f / gs;
        quantize_nvfp4(src + e * per, rows, cols, gs, t.at(wname).data<uint8_t>() + e * per / 2,
                       t.at(sname).data<uint8_t>() + e * per / kNvfp4BlockSize);
      });
      return;
    }
  }
}

}  // namespace

FloatLayer random_float_layer(const LayerConfig& config, int64_t E, int64_t K, int64_t N, uint64_t seed,
                              bool with_bias, float weight_std) {
  if (E < 1 || K < 1 || N < 1)
    throw InvalidArgument("E, K, N", "positive sizes", std::to_string(E) + ", " + std::to_string(K) + ", " + std::to_string(N));
  FloatLayer l;
  l.config = config;
  l.num_experts = E;
  l.hidden = K;
  l.inter = N;
  const int64_t R = l.w13_rows();
  l.w13.resize(static_cast<size_t>(E * R * K));
  l.w2.resize(static_cast<size_t>(E * K * N));
  // One stream per (matrix, expert): the values do not depend on the thread count.
  cpu::parallel_for(E, cpu::resolve_threads(0), [&](int64_t e) {
    fill_normal(l.w13.data() + e * R * K, R * K, seed * 1000003u + 2 * e + 1, weight_std);
    fill_normal(l.w2.data() + e * K * N, K * N, seed * 1000003u + 2 * e + 2, weight_std);
  });
  if (with_bias) {
    l.w13_bias.resize(static_cast<size_t>(E * R));
    l.w2_bias.resize(static_cast<size_t>(E * K));
    fill_normal(l.w13_bias.data(), E * R, seed ^ 0xB1A5u, 0.1f);
    fill_normal(l.w2_bias.data(), E * K, seed ^ 0xB1A6u, 0.1f);
  }
  return l;
}

LayerFile quantize_layer(const FloatLayer& l, const QuantizeOptions& o) {
  const int64_t E = l.num_experts, K = l.hidden, N = l.inter, R = l.w13_rows();
  if (static_cast<int64_t>(l.w13.size()) != E * R * K)
    throw InvalidArgument("w13", std::to_string(E * R * K) + " values", std::to_string(l.w13.size()));
  if (static_cast<int64_t>(l.w2.size()) != E * K * N)
    throw InvalidArgument("w2", std::to_string(E * K * N) + " values", std::to_string(l.w2.size()));
  if (o.format == Format::W4A8_INT4 || o.format == Format::MXFP4 || o.format == Format::NVFP4) {
    const int64_t bs = o.format == Format::W4A8_INT4 ? kW4A8GroupSize
                       : o.format == Format::MXFP4   ? kMxfp4BlockSize
                                                     : kNvfp4BlockSize;
    const std::string why = std::string(" of format ") + format_name(o.format) + ": blocks of " + std::to_string(bs);
    if (K % bs != 0) throw InvalidArgument("K (hidden size" + why + ")", "a multiple of " + std::to_string(bs), std::to_string(K));
    if (N % bs != 0) throw InvalidArgument("N (intermediate size" + why + ")", "a multiple of " + std::to_string(bs), std::to_string(N));
  }
  LayerFile out;
  out.config = l.config;
  out.config.format = o.format;
  out.config.act_dtype = o.act_dtype;
  out.config.weight_scale_layout = ScaleLayout::LINEAR;
  out.num_experts = E;
  out.hidden = K;
  out.inter = N;
  encode_matrix(o, l.w13.data(), E, R, K, "w13", out);
  if (o.progress) o.progress(1, 2, o.progress_user);
  encode_matrix(o, l.w2.data(), E, K, N, "w2", out);
  if (o.progress) o.progress(2, 2, o.progress_user);
  if (!l.w13_bias.empty()) {
    out.tensors["w13_bias"] = HostTensor(DType::F32, {E, R});
    std::copy(l.w13_bias.begin(), l.w13_bias.end(), out.tensors["w13_bias"].data<float>());
  }
  if (!l.w2_bias.empty()) {
    out.tensors["w2_bias"] = HostTensor(DType::F32, {E, K});
    std::copy(l.w2_bias.begin(), l.w2_bias.end(), out.tensors["w2_bias"].data<float>());
  }
  if (o.format == Format::FP8_TENSOR) {
    if (o.fp8_w13_input_scale > 0) {
      out.tensors["w13_input_scale"] = HostTensor(DType::F32, {1});
      out.tensors["w13_input_scale"].data<float>()[0] = o.fp8_w13_input_scale;
    }
    if (o.fp8_w2_input_scale > 0) {
      out.tensors["w2_input_scale"] = HostTensor(DType::F32, {1});
      out.tensors["w2_input_scale"].data<float>()[0] = o.fp8_w2_input_scale;
    }
  }
  if (o.format == Format::NVFP4 && o.act_dtype == ActDtype::NVFP4) {
    if (!(o.nvfp4_w13_act_amax > 0) || !(o.nvfp4_w2_act_amax > 0))
      throw InvalidArgument("nvfp4 activation amax", "positive calibration amax values for act_dtype=nvfp4",
                            std::to_string(o.nvfp4_w13_act_amax) + ", " + std::to_string(o.nvfp4_w2_act_amax));
    for (const char* name : {"w13_input_scale", "w2_input_scale"}) {
      const float amax = name[1] == '1' ? o.nvfp4_w13_act_amax : o.nvfp4_w2_act_amax;
      out.tensors[name] = HostTensor(DType::F32, {E});
      for (int64_t e = 0; e < E; ++e) out.tensors[name].data<float>()[e] = amax / (kE4M3Max * kE2M1Max);
    }
  }
  return out;
}

FloatLayer dequantize_layer(const LayerFile& f) {
  FloatLayer l;
  l.config = f.config;
  l.num_experts = f.num_experts;
  l.hidden = f.hidden;
  l.inter = f.inter;
  const int64_t E = f.num_experts, K = f.hidden, N = f.inter, R = l.w13_rows();
  const LayerWeights w = f.weights();
  const auto m13 = cpu::WeightMatrix::w13(f.config, w, R, K);
  const auto m2 = cpu::WeightMatrix::w2(f.config, w, K, N);
  l.w13.resize(static_cast<size_t>(E * R * K));
  l.w2.resize(static_cast<size_t>(E * K * N));
  cpu::parallel_for(E, cpu::resolve_threads(0), [&](int64_t e) {
    for (int64_t r = 0; r < R; ++r) m13.dequant_row<float>(e, r, l.w13.data() + (e * R + r) * K);
    for (int64_t r = 0; r < K; ++r) m2.dequant_row<float>(e, r, l.w2.data() + (e * K + r) * N);
  });
  auto copy_bias = [&](const char* name, std::vector<float>& dst) {
    auto it = f.tensors.find(name);
    if (it == f.tensors.end()) return;
    dst.assign(it->second.data<float>(), it->second.data<float>() + it->second.numel());
  };
  copy_bias("w13_bias", l.w13_bias);
  copy_bias("w2_bias", l.w2_bias);
  return l;
}

}  // namespace fusedmoe
