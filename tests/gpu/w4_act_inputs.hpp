#pragma once
// Host inputs of the 4-bit GEMM1 + activation tests (test_w4_wgmma_act_gpu.cpp, test_w4_mma_act_gpu.cpp): rows per
// expert -> offsets and each row's expert, random packed e2m1 weights with block scales (linear or 128x4 swizzled),
// bf16 activation rows, fc1 bias and NVFP4 per-expert global scales, drawn from one generator in that order.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "fusedmoe/codecs.hpp"
#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {

// A host vector's copy on the device (extra bytes after it, so that vector loads past a short end stay inside).
template <typename T>
DeviceBuffer to_device(const std::vector<T>& v, size_t extra = 16) {
  DeviceBuffer b(v.size() * sizeof(T) + extra);
  if (!v.empty()) b.upload(v.data(), v.size() * sizeof(T));
  return b;
}

struct W4ActInputs {
  std::vector<int32_t> offsets, row_expert;
  int32_t total = 0;
  std::vector<uint8_t> w, scales;  // [E, 2N, k/2]; scales [E, 2N, k/bs] or swizzled per expert
  std::vector<uint16_t> a;         // [total, k] bf16, natural k order
  std::vector<float> bias, w_expert;
};

inline W4ActInputs make_w4_act_inputs(Format format, bool swizzled, const std::vector<int32_t>& rows, int64_t N,
                                      int64_t k, std::mt19937_64& rng) {
  W4ActInputs in;
  const int E = static_cast<int>(rows.size());
  const int bs = format == Format::MXFP4 ? 32 : 16;
  const int64_t R = 2 * N, cols = k / bs;
  in.offsets.assign(E + 1, 0);
  for (int e = 0; e < E; ++e) {
    in.offsets[e + 1] = in.offsets[e] + rows[e];
    for (int r = 0; r < rows[e]; ++r) in.row_expert.push_back(e);
  }
  in.total = in.offsets[E];
  in.w.resize(static_cast<size_t>(E * R * k / 2));
  for (auto& b : in.w) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> flat(static_cast<size_t>(E * R * cols));
  for (auto& s : flat)
    s = format == Format::MXFP4 ? static_cast<uint8_t>(121 + rng() % 8) : static_cast<uint8_t>(0x18 + rng() % 0x30);
  if (swizzled) {
    const size_t per = swizzled_scale_bytes(R, cols);
    in.scales.assign(per * E, 0);
    for (int e = 0; e < E; ++e) swizzle_scales_128x4(flat.data() + e * R * cols, R, cols, in.scales.data() + e * per);
  } else {
    in.scales = flat;
  }
  std::normal_distribution<float> nd(0.0f, 1.0f);
  in.a.resize(static_cast<size_t>(in.total) * k);
  for (auto& x : in.a) x = float_to_bf16_bits(0.25f * nd(rng));
  in.bias.resize(static_cast<size_t>(E * R));
  for (auto& b : in.bias) b = 0.5f * nd(rng);
  in.w_expert.resize(E);
  for (auto& s : in.w_expert) s = std::ldexp(1.0f + static_cast<float>(rng() % 64) / 64.0f, static_cast<int>(rng() % 5) - 3);
  return in;
}

}  // namespace fusedmoe::gputest
