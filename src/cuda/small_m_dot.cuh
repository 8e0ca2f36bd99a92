#pragma once
// Pieces shared by the weight-streaming small-M kernels (small_m_gemm.cu, small_m_finalize.cu):
// the lane layout and the conversion of 16-byte chunks to fp32. Both kernels sum one weight row
// against one activation row in the same order (each lane over its chunks in k order, pass by
// pass, then an xor butterfly over its L lanes), so the same row pair gives the same bits in both.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/grouped_gemm.hpp"

namespace fusedmoe::cuda::small_m {

constexpr int kWarps = 8;
constexpr int kWarpRows = 2;  // weight rows (output columns) per group of L lanes
constexpr int kUnroll = 4;    // 16-byte chunks per lane and weight row in flight

// Elements per 16-byte chunk and their conversion to fp32.
template <Operand OP>
struct Chunk;
template <>
struct Chunk<Operand::BF16> {
  static constexpr int kElems = 8;
  __device__ static void to_float(const uint4& u, float (&f)[kElems]) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      f[2 * j] = __uint_as_float(w[j] << 16);
      f[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
    }
  }
};
template <>
struct Chunk<Operand::FP16> {
  static constexpr int kElems = 8;
  __device__ static void to_float(const uint4& u, float (&f)[kElems]) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 v = __half22float2(*reinterpret_cast<const __half2*>(&w[j]));
      f[2 * j] = v.x;
      f[2 * j + 1] = v.y;
    }
  }
};
template <>
struct Chunk<Operand::FP8> {
  static constexpr int kElems = 16;
  __device__ static void to_float(const uint4& u, float (&f)[kElems]) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const __nv_fp8x2_storage_t pair = static_cast<__nv_fp8x2_storage_t>((w[j] >> (16 * h)) & 0xffffu);
        const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3);
        const float2 v = __half22float2(*reinterpret_cast<const __half2*>(&hr));
        f[4 * j + 2 * h] = v.x;
        f[4 * j + 2 * h + 1] = v.y;
      }
    }
  }
};

// Lanes per weight row: the smallest power of two >= 4 whose first pass (L * kUnroll chunks)
// covers the row, 32 for rows longer than one pass of the warp.
inline int lanes_per_row(int64_t chunks) {
  int l = 4;
  while (l < 32 && static_cast<int64_t>(l) * kUnroll < chunks) l *= 2;
  return l;
}

}  // namespace fusedmoe::cuda::small_m
