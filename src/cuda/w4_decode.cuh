#pragma once
// Decoding helpers shared by the 4-bit weight GEMMs (w4_gemm.cu: mma kernel and dequant kernels,
// w4_wgmma.cu: the wgmma kernel). Numerics in w4_gemm.hpp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

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

}  // namespace fusedmoe::cuda::w4
