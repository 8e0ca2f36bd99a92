// The W4A8 wgmma kernel's int4 -> e5m2 decode (src/cuda/int4_fp8.cuh) and the mma kernel's fp16 pairs,
// run on the host through its prmt / fp16 emulations: every 16-bit half-word pattern in both halves of
// the word and both storage forms, each output byte / half decoded independently and compared with the
// integer. The prmt
// emulation is checked on hand-worked selectors first, so a wrong emulation cannot make a wrong
// decode pass (the GPU test tests/gpu/test_int4_fp8_device_gpu.cu compares device and host).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "cuda/int4_fp8.cuh"

namespace fusedmoe {
namespace {

using cuda::int4fp8::int4x8_to_e5m2;
using cuda::int4fp8::prmt;

TEST(Int4Fp8, PrmtEmulation) {
  // Bytes of {b, a} = 0x77665544'33221100 (a = 0x33221100).
  const uint32_t a = 0x33221100u, b = 0x77665544u;
  EXPECT_EQ(prmt(a, b, 0x3210u), a);
  EXPECT_EQ(prmt(a, b, 0x7654u), b);
  EXPECT_EQ(prmt(a, b, 0x5140u), 0x55114400u);
  EXPECT_EQ(prmt(a, b, 0x0000u), 0x00000000u);
  // Sign replicate: 0x80 and above -> 0xFF, below -> 0x00.
  EXPECT_EQ(prmt(0x7F80FF01u, 0u, 0xBA98u), 0x00FFFF00u);
  EXPECT_EQ(prmt(0x7F80FF01u, 0u, 0x3A18u), 0x7FFFFF00u);
}

int int4_value(uint32_t x, int i) {
  const int v = static_cast<int>((x >> (4 * i)) & 0xFu);
  return v >= 8 ? v - 16 : v;
}

float e5m2_to_float(uint32_t b) {  // finite codes
  const int e = static_cast<int>((b >> 2) & 0x1Fu), m = static_cast<int>(b & 3u);
  const float mag = e == 0 ? std::ldexp(static_cast<float>(m) / 4.0f, -14) : std::ldexp(1.0f + static_cast<float>(m) / 4.0f, e - 15);
  return (b & 0x80u) ? -mag : mag;
}

// The fp16 route: both storage forms (two's complement and q + 8), every half-word pattern.
TEST(Int4Fp8, E5m2EveryHalfWord) {
  EXPECT_EQ(e5m2_to_float(0x3C), 1.0f);  // the reference decode itself
  EXPECT_EQ(e5m2_to_float(0xC7), -7.0f);
  for (bool uint4b8 : {false, true})
    for (uint32_t h = 0; h < 65536; ++h) {
      const uint32_t x = h | (((h * 40503u) & 0xFFFFu) << 16);
      const auto c = int4x8_to_e5m2(x, uint4b8 ? 0u : 0x88888888u);
      for (int i = 0; i < 8; ++i) {
        const uint32_t got = ((i < 4 ? c.lo : c.hi) >> (8 * (i & 3))) & 0xFFu;
        const int raw = static_cast<int>((x >> (4 * i)) & 0xFu);
        const int v = uint4b8 ? raw - 8 : int4_value(x, i);
        ASSERT_EQ(e5m2_to_float(got), static_cast<float>(v))
            << (uint4b8 ? "uint4b8" : "int4") << " word " << std::hex << x << " value " << std::dec << i << " code " << got;
      }
    }
}

// The fp16 pairs on the way (the mma kernel's int4 operand, w4_decode.cuh decode_word): pair i holds values i
// (low half) and i + 4 (high half) exactly, both storage forms, every half-word pattern.
TEST(Int4Fp8, F16PairsEveryHalfWord) {
  using cuda::int4fp8::host::half_to_float;
  EXPECT_EQ(half_to_float(0xC700u), -7.0f);  // the reference decode itself
  EXPECT_EQ(half_to_float(0x3C00u), 1.0f);
  for (bool uint4b8 : {false, true})
    for (uint32_t h = 0; h < 65536; ++h) {
      const uint32_t x = h | (((h * 40503u) & 0xFFFFu) << 16);
      uint32_t q[4];
      cuda::int4fp8::int4x8_to_f16_pairs(x, uint4b8 ? 0u : 0x88888888u, q);
      for (int i = 0; i < 8; ++i) {
        const uint32_t half = (q[i & 3] >> (i < 4 ? 0 : 16)) & 0xFFFFu;
        const int raw = static_cast<int>((x >> (4 * i)) & 0xFu);
        const int v = uint4b8 ? raw - 8 : int4_value(x, i);
        ASSERT_EQ(half_to_float(half), static_cast<float>(v))
            << (uint4b8 ? "uint4b8" : "int4") << " word " << std::hex << x << " value " << std::dec << i << " half " << half;
      }
    }
}

}  // namespace
}  // namespace fusedmoe
