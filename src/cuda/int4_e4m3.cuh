#pragma once
// Eight packed int4 weights -> their e4m3 codes, with byte permutes only (w4a8_wgmma.cu). Every
// int4 value -8..7 is exact in e4m3, so the fp8 tensor cores multiply the checkpoint's integers.
//
// Host and device: on the device prmt is the PTX instruction, on the host an emulation of it, so
// a CPU test (tests/cpu/test_int4_e4m3.cpp) checks the mapping for every input word.
//
// How: a prmt selector nibble picks one of 8 bytes (bits 0..2) and, with bit 3 set, replaces the
// byte by its sign bit copied 8 times. A two's complement int4 is such a nibble: v >= 0 picks
// entry v of a table of e4m3(0..7), while v < 0 (bit 3 set) gives 0x00 from that table (all its
// bytes have the top bit clear). The same nibbles with bit 3 flipped pick entry v + 8 of a table
// of e4m3(-8..-1) for v < 0 (and 0xFF for v >= 0). The sign of each nibble is then spread to a
// byte mask (a permute collects bits 3 / 7 / 11 / 15 of the word and its 4-bit shift as the top
// bits of four bytes, a sign-replicating permute widens them) that picks the right table's byte.
// The output bit 7 of a permute depends only on which byte it picks, never on bit 3 of the
// selector, so the sign cannot come from the tables alone: the mask is the price of that.
#include <cstdint>

#if defined(__CUDACC__)
#define FMOE_HD __host__ __device__ __forceinline__
#else
#define FMOE_HD inline
#endif

namespace fusedmoe::cuda::int4e4m3 {

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

// e4m3 codes of 0..7 (bytes 0..7) and of -8..-1 (bytes 0..7 = values -8 + i).
constexpr uint32_t kPos0 = 0x44403800u, kPos1 = 0x4E4C4A48u;
constexpr uint32_t kNeg0 = 0xCACCCED0u, kNeg1 = 0xB8C0C4C8u;

struct Codes {
  uint32_t lo, hi;  // e4m3 codes of nibbles 0..3 (byte i = nibble i) and of nibbles 4..7
};

// x: eight two's complement int4 values, value i in bits 4i..4i+3.
FMOE_HD Codes int4x8_to_e4m3(uint32_t x) {
  const uint32_t xq = x ^ 0x88888888u;  // bit 3 flipped: the negative values now pick
  const uint32_t p_lo = prmt(kPos0, kPos1, x), p_hi = prmt(kPos0, kPos1, x >> 16);
  const uint32_t q_lo = prmt(kNeg0, kNeg1, xq), q_hi = prmt(kNeg0, kNeg1, xq >> 16);
  // Sign bits 3, 7, 11, 15 (19, 23, 27, 31) to bit 7 of bytes 0..3: from x << 4 and x in turn.
  const uint32_t y = x << 4;
  const uint32_t m_lo = prmt(prmt(y, x, 0x5140u), 0u, 0xBA98u);
  const uint32_t m_hi = prmt(prmt(y, x, 0x7362u), 0u, 0xBA98u);
  return {(q_lo & m_lo) | (p_lo & ~m_lo), (q_hi & m_hi) | (p_hi & ~m_hi)};
}

}  // namespace fusedmoe::cuda::int4e4m3

#undef FMOE_HD
