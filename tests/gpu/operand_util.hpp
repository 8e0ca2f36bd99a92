#pragma once
// Random GEMM operands for the kernel-level GPU tests: values drawn in fp32, stored as bf16 /
// fp16 / e4m3 bytes, with the exact float value of every stored element for host references.
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/grouped_gemm.hpp"
#include "fusedmoe/codecs.hpp"

namespace fusedmoe::gputest {

using cuda::Operand;

// Random operand values in the operand type: the stored bytes and their float values.
struct Operands {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};
inline Operands random_operand(Operand op, int64_t count, float scale, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, scale);
  Operands o;
  o.values.resize(count);
  o.bytes.resize(count * (op == Operand::FP8 ? 1 : 2));
  for (int64_t i = 0; i < count; ++i) {
    const float x = nd(rng);
    if (op == Operand::FP8) {
      o.bytes[i] = float_to_e4m3(x);
      o.values[i] = e4m3_to_float(o.bytes[i]);
    } else {
      const uint16_t b = op == Operand::BF16 ? float_to_bf16_bits(x) : float_to_fp16_bits(x);
      std::memcpy(&o.bytes[2 * i], &b, 2);
      o.values[i] = op == Operand::BF16 ? bf16_bits_to_float(b) : fp16_bits_to_float(b);
    }
  }
  return o;
}

}  // namespace fusedmoe::gputest
