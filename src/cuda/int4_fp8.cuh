#pragma once
// Eight packed int4 weights -> their e5m2 codes through fp16 arithmetic (w4a8_wgmma.cu): every int4
// value -8..7 is exact in e5m2 (and in fp16), so the fp8 tensor cores multiply the checkpoint's
// integers; and the fp16 pairs on the way, the mma kernel's int4 operand (w4_gemm.cu, decode_layer_w4.cu).
//
// Host and device: on the device prmt and the fp16x2 add / fma are the PTX instructions, on the
// host emulations of them, so a CPU test (tests/cpu/test_int4_fp8.cpp) checks the mapping for
// every input half-word against the codec, and a GPU test (tests/gpu/test_int4_fp8_device_gpu.cu)
// the device against the host, bit for bit.
//
// Why not e4m3 with byte permutes (the first version, bench/results/2026-11-22-h100-w4a8-wgmma v1):
// a two's complement nibble is a prmt selector (bits 0..2 pick one of 8 table bytes, bit 3 turns
// the byte into its sign replicated), so two permutes over tables of e4m3(0..7) and e4m3(-8..-1)
// and a sign mask built by two more give the codes - 15 integer-pipe instructions per 8 values,
// and Hopper issues PRMT / LOP3 at half rate. The fp16 way below needs 9 of those plus 4 on the
// FMA pipe: 0.92-0.98x the layer time.
#include <cstdint>

#if defined(__CUDACC__)
#define FMOE_HD __host__ __device__ __forceinline__
#else
#define FMOE_HD inline
#endif

namespace fusedmoe::cuda::int4fp8 {

// prmt.b32 d, a, b, c (default mode): byte i of d is byte (c >> 4i) & 7 of {b, a} (a the low
// four), or that byte's top bit copied to all 8 bits when (c >> 4i) & 8.
FMOE_HD uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
#else
  const uint64_t src = (static_cast<uint64_t>(b) << 32) | a;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t c = (sel >> (4 * i)) & 0xFu;
    uint32_t byte = static_cast<uint32_t>(src >> (8 * (c & 7u))) & 0xFFu;
    if (c & 8u) byte = (byte & 0x80u) ? 0xFFu : 0u;
    r |= byte << (8 * i);
  }
  return r;
#endif
}

struct Codes {
  uint32_t lo, hi;  // codes of nibbles 0..3 (byte i = nibble i) and of nibbles 4..7
};

// A nibble u = q + 8 placed in the mantissa of fp16 1024 (bits 0..3: 1024 + u; bits 4..7:
// 1024 + 16 u) gives q after one exact fp16 add (- 1032) or fma (x 1/16 - 72); every q in -8..7 is
// an fp16 value whose mantissa has at most 2 bits after the leading one, so its e5m2 code is the
// fp16's high byte, exactly.

#if !defined(__CUDA_ARCH__)
namespace host {
inline float half_to_float(uint32_t h) {  // normal and zero fp16 only (all that arises here)
  const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  const float mag = e == 0 ? static_cast<float>(m) * 0x1p-24f : (1.0f + static_cast<float>(m) / 1024.0f) * static_cast<float>(1u << e) * 0x1p-15f;
  return (h & 0x8000u) ? -mag : mag;
}
inline uint32_t float_to_half_exact(float f) {  // f exactly representable as a normal fp16 or zero
  if (f == 0.0f) return 0;
  uint32_t sign = f < 0 ? 0x8000u : 0u;
  float a = f < 0 ? -f : f;
  int e = 0;
  while (a >= 2.0f) { a /= 2.0f; ++e; }
  while (a < 1.0f) { a *= 2.0f; --e; }
  return sign | (static_cast<uint32_t>(e + 15) << 10) | static_cast<uint32_t>((a - 1.0f) * 1024.0f);
}
}  // namespace host
#endif

// fp16x2 a + b and a x b + c (the results here are small integers: exact either way).
FMOE_HD uint32_t h2_add(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("add.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
#else
  const uint32_t lo = host::float_to_half_exact(host::half_to_float(a & 0xFFFFu) + host::half_to_float(b & 0xFFFFu));
  const uint32_t hi = host::float_to_half_exact(host::half_to_float(a >> 16) + host::half_to_float(b >> 16));
  return lo | (hi << 16);
#endif
}
FMOE_HD uint32_t h2_fma(uint32_t a, uint32_t b, uint32_t c) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
#else
  auto one = [](uint32_t x, uint32_t y, uint32_t z) {
    return host::float_to_half_exact(host::half_to_float(x) * host::half_to_float(y) + host::half_to_float(z));
  };
  return one(a & 0xFFFFu, b & 0xFFFFu, c & 0xFFFFu) | (one(a >> 16, b >> 16, c >> 16) << 16);
#endif
}

// x: eight int4 values, value i in bits 4i..4i+3; to_biased: the xor that makes them q + 8
// (0x88888888 for two's complement q, 0 for values stored as q + 8). q[i]: the fp16x2 pair
// (q_i, q_i+4), exactly - the mma kernel's int4 operand (w4_decode.cuh decode_word). One shift,
// four masks with the xor folded into their constants, and four fp16 operations per 8 values (the
// nibbles at bits 4..7 of a half are taken where they lie, as 1024 + 16 u, and scaled by 1/16).
FMOE_HD void int4x8_to_f16_pairs(uint32_t x, uint32_t to_biased, uint32_t (&q)[4]) {
  const uint32_t ca = 0x64006400u ^ (to_biased & 0x000F000Fu), cb = 0x64006400u ^ (to_biased & 0x00F000F0u);
  const uint32_t y = x >> 8;
  const uint32_t a = (x & 0x000F000Fu) ^ ca;  // fp16 1024 + u of nibbles 0 and 4
  const uint32_t b = (x & 0x00F000F0u) ^ cb;  // 1024 + 16 u of nibbles 1 and 5
  const uint32_t c = (y & 0x000F000Fu) ^ ca;  // nibbles 2 and 6
  const uint32_t d = (y & 0x00F000F0u) ^ cb;  // nibbles 3 and 7
  constexpr uint32_t kMinus1032 = 0xE408E408u, kSixteenth = 0x2C002C00u, kMinus72 = 0xD480D480u;
  q[0] = h2_add(a, kMinus1032);
  q[1] = h2_fma(b, kSixteenth, kMinus72);
  q[2] = h2_add(c, kMinus1032);
  q[3] = h2_fma(d, kSixteenth, kMinus72);
}

// The same eight values' e5m2 codes (the fp16 pairs' high bytes): nibbles 0..3 and 4..7.
FMOE_HD Codes int4x8_to_e5m2(uint32_t x, uint32_t to_biased) {
  uint32_t q[4];
  int4x8_to_f16_pairs(x, to_biased, q);
  const uint32_t ab = prmt(q[0], q[1], 0x7351u), cd = prmt(q[2], q[3], 0x7351u);  // codes 0 1 4 5 / 2 3 6 7
  return {prmt(ab, cd, 0x5410u), prmt(ab, cd, 0x7632u)};
}

}  // namespace fusedmoe::cuda::int4fp8

#undef FMOE_HD
