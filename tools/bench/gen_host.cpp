// Host versions of the data generators of kernels.cu (same hash, same distributions; the
// conversions are the library's codecs, bit-exact with CUDA's). Used by --self-test, which
// runs without a GPU.
#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "fusedmoe/codecs.hpp"
#include "gen_host.hpp"

namespace fmbench {
namespace {

uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}
uint64_t hash2(uint64_t seed, uint64_t i) { return mix64(seed ^ mix64(i + 0x9e3779b97f4a7c15ULL)); }
float unit(uint64_t h) { return static_cast<float>(h >> 40) * (1.0f / 16777216.0f); }

}  // namespace

void gen_uniform_host(void* out, fusedmoe::DType dtype, size_t n, uint64_t seed, float lo, float hi) {
  const float span = hi - lo;
  for (size_t i = 0; i < n; ++i) {
    const float v = lo + span * unit(hash2(seed, i));
    switch (dtype) {
      case fusedmoe::DType::F32: static_cast<float*>(out)[i] = v; break;
      case fusedmoe::DType::F16: static_cast<uint16_t*>(out)[i] = fusedmoe::float_to_fp16_bits(v); break;
      case fusedmoe::DType::BF16: static_cast<uint16_t*>(out)[i] = fusedmoe::float_to_bf16_bits(v); break;
      case fusedmoe::DType::F8_E4M3: static_cast<uint8_t*>(out)[i] = fusedmoe::float_to_e4m3(v); break;
      default: throw std::invalid_argument("gen_uniform_host: unsupported dtype");
    }
  }
}

void gen_bytes_host(uint8_t* out, size_t n, uint64_t seed) {
  for (size_t w = 0; w * 8 < n; ++w) {
    const uint64_t h = hash2(seed, w);
    for (size_t b = 0; b < 8 && w * 8 + b < n; ++b) out[w * 8 + b] = static_cast<uint8_t>(h >> (8 * b));
  }
}

void gen_e8m0_host(uint8_t* out, size_t n, uint64_t seed, int base_code, int spread) {
  spread = std::max(0, spread);
  for (size_t i = 0; i < n; ++i) {
    const int r = static_cast<int>(hash2(seed, i) % static_cast<uint64_t>(2 * spread + 1)) - spread;
    out[i] = static_cast<uint8_t>(std::min(254, std::max(1, base_code + r)));
  }
}

void set_column0_host(void* data, fusedmoe::DType dtype, int64_t rows, int64_t cols, float v) {
  for (int64_t r = 0; r < rows; ++r) {
    switch (dtype) {
      case fusedmoe::DType::F32: static_cast<float*>(data)[r * cols] = v; break;
      case fusedmoe::DType::F16: static_cast<uint16_t*>(data)[r * cols] = fusedmoe::float_to_fp16_bits(v); break;
      case fusedmoe::DType::BF16: static_cast<uint16_t*>(data)[r * cols] = fusedmoe::float_to_bf16_bits(v); break;
      default: throw std::invalid_argument("set_column0_host: unsupported dtype");
    }
  }
}

}  // namespace fmbench
