#pragma once
// The nvfp4 (W4A4) activation quantisers' per-value step without a division per value: for a
// 16-block with e4m3 scale sf > 0 and a value's product p = x * gs, the dequantised-without-gs value
// e2m1(p / sf) * sf, where p / sf is the IEEE (round-to-nearest-even) quotient and e2m1() rounds to
// nearest even and saturates at 6 (the CPU's float_to_e2m1: NaN -> +6, the sign kept otherwise,
// -0 included). The division ran per value in the quantisers (__fdiv_rn: a reciprocal, five FMAs,
// a range check and a branch to the slow path) and the code by seven compares - about 45
// instructions a value. Here:
// - The quotient by Markstein's correction with one reciprocal per block: y = RN(1 / sf),
//   q0 = RN(a * y), r = a - sf * q0 (exact in an FMA), q = RN(q0 + r * y) is RN(a / sf) when y is
//   the correctly rounded reciprocal and nothing over- or underflows. |p| is first clamped to 8 sf
//   (past 5 sf the code is 6 whatever the quotient; a NaN becomes 8 sf too, its sign dropped below),
//   so q <= 8; below ~2^-100 the residual may be inexact, but those quotients round to 0 anyway.
// - The e2m1 rounding by adding and subtracting c = 1.5 x 2^22 x spacing, the spacing of the e2m1
//   grid in q's binade (0.5 below 2, 1 in [2, 4), 2 from 4): fp32's own round-to-nearest-even at
//   that position is e2m1's (its even neighbour is the even code), then min(., 6).
// Host and device (the CPU test tests/cpu/test_nvfp4_round.cpp checks it against the codec around
// every decision point for every e4m3 scale; the GPU test tests/gpu/test_e2m1_device_gpu.cu checks the
// device form against the division form for every fp32 p and every scale).
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define FMOE_NVR_HD __host__ __device__ __forceinline__
#else
#define FMOE_NVR_HD inline
#endif

namespace fusedmoe::cuda::nvfp4r {

FMOE_NVR_HD uint32_t f2u(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
FMOE_NVR_HD float u2f(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// RN(1 / sf): once per 16-block.
FMOE_NVR_HD float recip(float sf) {
#if defined(__CUDA_ARCH__)
  return __frcp_rn(sf);
#else
  return 1.0f / sf;
#endif
}

// e2m1(p / sf) * sf as above; sf > 0 an e4m3 value, y = recip(sf).
FMOE_NVR_HD float e2m1_times_scale(float p, float sf, float y) {
  const uint32_t u = f2u(p), abits = u & 0x7fffffffu;
  const float a = fminf(u2f(abits), 8.0f * sf);  // NaN -> 8 sf (fminf returns the number)
#if defined(__CUDA_ARCH__)
  const float q0 = __fmul_rn(a, y);
  const float q = __fmaf_rn(__fmaf_rn(-sf, q0, a), y, q0);
#else
  const float q0 = a * y;
  const float q = std::fmaf(std::fmaf(-sf, q0, a), y, q0);
#endif
  // q in [0, 8]: binade exponent field 127 (below 2: spacing 0.5), 128 (1), 129 or 130 (2; 130 is
  // q = 8 exactly, where spacing 4 also leaves 8). c = 1.5 x 2^(e - 105) has exponent field e + 22.
  const uint32_t e = f2u(q) & 0x7f800000u;
  const float c = u2f((e > 0x3f800000u ? e : 0x3f800000u) + 0x0b400000u);
#if defined(__CUDA_ARCH__)
  const float m = fminf(__fadd_rn(__fadd_rn(q, c), -c), 6.0f);
  const float v = __fmul_rn(m, sf);
#else
  volatile float t = q + c;  // two roundings, in this order (no reassociation)
  const float m = fminf(t - c, 6.0f);
  const float v = m * sf;
#endif
  const uint32_t sign = abits > 0x7f800000u ? 0u : (u & 0x80000000u);
  return u2f(f2u(v) | sign);
}

}  // namespace fusedmoe::cuda::nvfp4r

#undef FMOE_NVR_HD
