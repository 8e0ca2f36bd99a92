// The host engine: route / pack / combine as plain loops over host memory (CPU backend ranks,
// thread transport). The device engine (device_engine.cu) does the same steps with kernels; both
// follow ep_internal.hpp's Plan so the CPU tests check the logic the GPU path implements.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ep/ep_internal.hpp"
#include "fusedmoe/codecs.hpp"
#include "fusedmoe/error.hpp"
#include "fusedmoe/quantize.hpp"

namespace fusedmoe::ep {
namespace {

float load(DType dt, const void* base, int64_t i) {
  switch (dt) {
    case DType::F32:
      return static_cast<const float*>(base)[i];
    case DType::BF16:
      return bf16_bits_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::F16:
      return fp16_bits_to_float(static_cast<const uint16_t*>(base)[i]);
    default:
      return 0.0f;
  }
}
void store(DType dt, void* base, int64_t i, float v) {
  switch (dt) {
    case DType::F32:
      static_cast<float*>(base)[i] = v;
      break;
    case DType::BF16:
      static_cast<uint16_t*>(base)[i] = float_to_bf16_bits(v);
      break;
    case DType::F16:
      static_cast<uint16_t*>(base)[i] = float_to_fp16_bits(v);
      break;
    default:
      break;
  }
}

class HostEngine final : public Engine {
 public:
  void* alloc(size_t bytes) override {
    void* p = std::calloc(std::max<size_t>(bytes, 1), 1);
    if (!p) throw Error("fusedmoe EP: out of host memory (" + std::to_string(bytes) + " bytes)");
    return p;
  }
  void release(void* p) override { std::free(p); }
  void upload(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void download_sync(void* dst, const void* src, size_t bytes, void*) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void zero(void* p, size_t bytes, void*) override {
    if (bytes) std::memset(p, 0, bytes);
  }

  void route(const Plan& p, void*) override {
    for (int d = 0; d < p.world; ++d) {
      int32_t n = 0;
      for (int64_t t = 0; t < p.M; ++t) p.pos[t * p.world + d] = token_goes_to(p, t, d) ? n++ : -1;
      p.send_counts[d] = n;
    }
  }

  void pack(const Plan& p, void*) override {
    const int64_t K = p.K, groups = p.groups();
    const size_t xrow = static_cast<size_t>(K) * dtype_size(p.x_dtype);
    std::vector<float> xf, scales;
    std::vector<uint8_t> codes;
    if (p.fp8) {
      xf.resize(static_cast<size_t>(K));
      codes.resize(static_cast<size_t>(K));
      scales.resize(static_cast<size_t>(groups));
    }
    for (int64_t t = 0; t < p.M; ++t) {
      if (p.fp8) {
        // Quantised once per token, exactly as the fp8-block layer quantises its input rows.
        for (int64_t k = 0; k < K; ++k) xf[k] = load(p.x_dtype, p.x, t * K + k);
        quantize_fp8_per_token_group(xf.data(), 1, K, kFp8BlockSize, p.ue8m0, codes.data(), scales.data());
      }
      for (int d = 0; d < p.world; ++d) {
        const int32_t pos = p.pos[t * p.world + d];
        if (pos < 0) continue;
        const int64_t r = block_offset(p, p.send_counts, d) + pos;
        if (p.fp8) {
          std::memcpy(static_cast<uint8_t*>(p.send_x) + r * K, codes.data(), static_cast<size_t>(K));
          std::memcpy(p.send_scale + r * groups, scales.data(), static_cast<size_t>(groups) * sizeof(float));
        } else {
          std::memcpy(static_cast<uint8_t*>(p.send_x) + r * xrow, static_cast<const uint8_t*>(p.x) + t * xrow, xrow);
        }
        std::memcpy(p.send_ids + r * p.topk, p.ids + t * p.topk, static_cast<size_t>(p.topk) * sizeof(int32_t));
        std::memcpy(p.send_w + r * p.topk, p.weights + t * p.topk, static_cast<size_t>(p.topk) * sizeof(float));
      }
    }
    if (p.padded) {
      for (int d = 0; d < p.world; ++d)
        for (int64_t i = p.send_counts[d]; i < p.max_tokens; ++i) {
          const int64_t r = static_cast<int64_t>(d) * p.max_tokens + i;
          std::fill(p.send_ids + r * p.topk, p.send_ids + (r + 1) * p.topk, -1);
          std::fill(p.send_w + r * p.topk, p.send_w + (r + 1) * p.topk, 0.0f);
        }
    }
  }

  void combine(const Plan& p, void*) override {
    const int64_t K = p.K;
    std::vector<float> acc(static_cast<size_t>(K));
    for (int64_t t = 0; t < p.M; ++t) {
      // -0.0f is the identity of addition (+0.0f would turn a -0 partial into +0); a token with
      // no expert anywhere is written as +0, like the single-GPU layer.
      std::fill(acc.begin(), acc.end(), -0.0f);
      int hits = 0;
      for (int d = 0; d < p.world; ++d) {  // ascending rank order: deterministic
        const int32_t pos = p.pos[t * p.world + d];
        if (pos < 0) continue;
        const int64_t r = block_offset(p, p.send_counts, d) + pos;
        ++hits;
        for (int64_t k = 0; k < K; ++k) acc[k] += load(p.x_dtype, p.combine_recv, r * K + k);
      }
      for (int64_t k = 0; k < K; ++k) store(p.x_dtype, p.out, t * K + k, hits ? acc[k] : 0.0f);
    }
  }
};

}  // namespace

std::unique_ptr<Engine> make_host_engine() { return std::make_unique<HostEngine>(); }

}  // namespace fusedmoe::ep
