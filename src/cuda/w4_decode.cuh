#pragma once
// Decoding helpers shared by the 4-bit weight GEMMs (w4_gemm.cu: mma kernel and dequant kernels,
// w4_wgmma.cu: the wgmma kernel). Numerics in w4_gemm.hpp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "cuda/int4_fp8.cuh"
#include "cuda/w4_kperm.cuh"

namespace fusedmoe::cuda::w4 {

enum Fmt : int { kInt4 = 0, kMx = 1, kNv = 2 };

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  __nv_bfloat162 r = __hmul2(*reinterpret_cast<__nv_bfloat162*>(&a), *reinterpret_cast<__nv_bfloat162*>(&b));
  return *reinterpret_cast<uint32_t*>(&r);
}

// e2m1 codes are placed into bf16 bit patterns that read as value x 2^-126 (sign to bit 15, the
// three exponent / mantissa bits to bits 8..6; code 1 = 0.5 lands on a subnormal, exactly). One
// bf16 multiply by the block scale x 2^(126 - kE2m1Shift) then gives value x scale x
// 2^-kE2m1Shift, exact, and the fp32 sums are multiplied by 2^kE2m1Shift at the end. (The shift
// keeps scale x 2^(126 - shift) inside bf16's range for every e4m3 scale and e8m0 scales up to
// 2^11; weights scaled beyond 2^11 overflow to inf, never to a wrong finite value.)
constexpr int kE2m1Shift = 10;

__device__ __forceinline__ int64_t swizzled_offset(int64_t m, int64_t kk, int64_t cols) {
  const int64_t kt = (cols + 3) / 4;
  return (m / 128) * (kt * 512) + (kk / 4) * 512 + (m % 32) * 16 + ((m % 128) / 32) * 4 + (kk % 4);
}

// Stored scale bits -> what the decoders use: int4 the fp32 bits of the bf16 group scale; e2m1
// the bf16x2 multiplier (block scale x 2^(126 - kE2m1Shift), both halves).
template <int F>
__device__ __forceinline__ uint32_t scale_bits(uint32_t raw) {
  if constexpr (F == kInt4) {
    return raw << 16;
  } else if constexpr (F == kMx) {
    // 2^(code - 127) x 2^(126 - shift): bf16 exponent field code - 1 - shift + 127.
    const int ex = static_cast<int>(raw) + 126 - kE2m1Shift;
    const uint32_t bits = raw == 0xFF ? 0x7FC0u : (ex >= 255 ? 0x7F80u : static_cast<uint32_t>(ex) << 7);
    return bits | (bits << 16);
  } else {
    const __half_raw hr = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(raw), __NV_E4M3);
    const float sf = __half2float(__half(hr)) * 0x1p116f;  // exact: 2^(126 - kE2m1Shift)
    const uint32_t bits = __bfloat16_as_ushort(__float2bfloat16_rn(sf));
    return bits | (bits << 16);
  }
}

// Word of 8 packed values (k0 in the low nibble) -> pairs (k0,k4) (k1,k5) (k2,k6) (k3,k7) of
// 16-bit values:
//   int4: q exactly (fp16); the group scale is applied to the fp32 sums (by the kernel).
//   e2m1: value x s2, s2 = block scale x 2^(126 - kE2m1Shift) (scale_bits).
// kMul: the e2m1 placement by mask, multiply, mask instead of shifts and masks (same bits).
template <int F, bool kMul = false>
__device__ __forceinline__ void decode_word(uint32_t w, uint32_t s2, bool uint4b8, uint32_t (&p)[4]) {
  if constexpr (F == kInt4) {
    // int4_fp8.cuh: one shift and four masks per word (the odd nibbles scaled by 1/16 where they lie) where shifting
    // each pair down took three shifts more, and the storage form's xor folded into the masks' constants.
    int4fp8::int4x8_to_f16_pairs(w, uint4b8 ? 0u : 0x88888888u, p);
  } else {
    uint32_t raw[4];
    if constexpr (kMul) {
      // Pair (k_j, k_j+4): nibbles j and j + 4 masked out, then one multiply places each nibble
      // twice (x * (2^a + 2^b) = x << a | x << b: the copies' bit ranges are disjoint, no
      // carries), and one mask keeps the exponent / mantissa bits of the first copy (bits 8..6)
      // and the sign of the second (bit 15) in both halves: three instructions per pair where the
      // shift form takes four (two shifts, two masks); the same bits for every word (checked over
      // all 2^32 words). Faster in the one-token kernel (0.97-0.99x the layer time); in the mma
      // kernel alone slower at 8 / 64 tokens on gpt-oss-120b mxfp4 (1.016 / 1.033; H100,
      // bench/results/2026-11-26-h100-decode-layer-w4 r6), but with the operand stored pre-paired
      // (no PRMT) 0.93-0.97x: MXFP4's mma instances use it since 2026-11-28, NVFP4's since the
      // same day (0.95-1.01x; w4_gemm.cu kLean).
      constexpr uint32_t kKeep = 0x81C081C0u;  // bit 15, bits 8..6 of each half
      const uint32_t w8 = w >> 8;              // nibbles 2, 3, 6, 7 where 0, 1, 4, 5 were
      raw[0] = ((w & 0x000F000Fu) * 0x1040u) & kKeep;
      raw[1] = ((w & 0x00F000F0u) * 0x104u) & kKeep;
      raw[2] = ((w8 & 0x000F000Fu) * 0x1040u) & kKeep;
      raw[3] = ((w8 & 0x00F000F0u) * 0x104u) & kKeep;
    } else {
      constexpr uint32_t kMag = 0x01C001C0u, kSign = 0x80008000u;
      raw[0] = ((w << 6) & kMag) | ((w << 12) & kSign);
      raw[1] = ((w << 2) & kMag) | ((w << 8) & kSign);
      raw[2] = ((w >> 2) & kMag) | ((w << 4) & kSign);
      raw[3] = ((w >> 6) & kMag) | (w & kSign);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) p[i] = bf16x2_mul(raw[i], s2);
  }
}

// c += A x B, m16n8k16: fp16 operands for int4 (W4A8's mma way), bf16 for e2m1.
template <int F>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (F == kInt4) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// The activations permuted as decode_word permutes the weights: 8 16-bit values (one uint4,
// k0..k7) -> the B registers of the two k16 MMA steps of a word, (k0,k4) (k1,k5) | (k2,k6) (k3,k7).
// (Stored in that order, KOrder::W4_MMA, they need none of it: the int4 way's operand.)
__device__ __forceinline__ void permute_b(const uint4& x, uint32_t (&b)[4]) {
  const uint4 k = kpair_words(x);
  b[0] = k.x, b[1] = k.y, b[2] = k.z, b[3] = k.w;
}

}  // namespace fusedmoe::cuda::w4
