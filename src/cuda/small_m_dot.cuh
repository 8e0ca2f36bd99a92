#pragma once
// Pieces shared by the weight-streaming small-M kernels (small_m_gemm.cu, small_m_activation.cu,
// small_m_finalize.cu): the lane layout, the conversion of 16-byte chunks to fp32, and the passes
// over the weights. All three sum one weight row against one activation row through load_pass,
// fma_pass and group_sum (each lane over its chunks in k order, pass by pass, then an xor butterfly
// over its L lanes), so the same row pair gives the same bits in every one of them.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

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

// One pass of weight loads: chunks c0 + L * u (u < kUnroll) of the lane group's kWarpRows weight
// rows (row i starts at rows[i]), zero past the row's end or where ok[i] is false.
template <int L>
__device__ __forceinline__ void load_pass(uint4 (&w)[kUnroll][kWarpRows], const uint8_t* const (&rows)[kWarpRows],
                                          const bool (&ok)[kWarpRows], int64_t c0, int64_t chunks) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t c = c0 + L * u;
#pragma unroll
    for (int i = 0; i < kWarpRows; ++i)
      w[u][i] = (c < chunks && ok[i]) ? __ldg(reinterpret_cast<const uint4*>(rows[i] + c * 16))
                                      : make_uint4(0, 0, 0, 0);
  }
}

// fp8-block (DeepSeek-V3 1x128 activation / 128x128 weight scales): where one lane group's products
// meet their scales. sa[kb * sa_stride + j] is activation row j's scale of k block kb (the BLOCK
// scale layout: an expert's rows column-major per k block), sw[kb] the weight rows' scale (the
// group's kWarpRows rows lie in one 128-row block: they start at an even row and 128 is even).
struct BlockScalesRef {
  const float* sa;
  int64_t sa_stride;
  const float* sw;
};

// Multiplies one pass of weights (load_pass at c0) with nr <= RB activation rows (row j starts at
// a + j * row_bytes) into acc[i][j], chunk by chunk in k order.
//   kBlock false: one fmaf per product into acc.
//   kBlock true (fp8-block, e4m3 operands, *s the scales): each chunk's 16 products summed on their
//     own (from zero, in k order), then added to acc times a_scale * w_scale of the chunk's
//     128-wide k block (8 chunks per block), as the blockwise GEMM promotes each k block's sums.
template <Operand OP, int L, bool kBlock = false, int RB>
__device__ __forceinline__ void fma_pass(float (&acc)[kWarpRows][RB], const uint4 (&w)[kUnroll][kWarpRows],
                                         const uint8_t* a, int64_t row_bytes, int nr, int64_t c0, int64_t chunks,
                                         const BlockScalesRef* s = nullptr) {
  static_assert(!kBlock || OP == Operand::FP8, "block scales are for e4m3 operands");
  using C = Chunk<OP>;
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t c = c0 + L * u;
    if (c >= chunks) break;
    const int64_t kb = c >> 3;  // kBlock: 16 e4m3 values per chunk, 8 chunks per k block
    const float sw = kBlock ? __ldg(s->sw + kb) : 1.0f;
    float wf[kWarpRows][C::kElems];
#pragma unroll
    for (int i = 0; i < kWarpRows; ++i) C::to_float(w[u][i], wf[i]);
#pragma unroll
    for (int j = 0; j < RB; ++j) {
      if (j >= nr) break;
      const uint4 av = __ldg(reinterpret_cast<const uint4*>(a + j * row_bytes + c * 16));
      float sc = 1.0f;
      if constexpr (kBlock) sc = __ldg(s->sa + kb * s->sa_stride + j) * sw;
      float af[C::kElems];
      C::to_float(av, af);
      if constexpr (kBlock) {
#pragma unroll
        for (int i = 0; i < kWarpRows; ++i) {
          float part = 0.0f;
#pragma unroll
          for (int q = 0; q < C::kElems; ++q) part = fmaf(wf[i][q], af[q], part);
          acc[i][j] = fmaf(part, sc, acc[i][j]);
        }
      } else {
#pragma unroll
        for (int i = 0; i < kWarpRows; ++i)
#pragma unroll
          for (int q = 0; q < C::kElems; ++q) acc[i][j] = fmaf(wf[i][q], af[q], acc[i][j]);
      }
    }
  }
}

// The sum of v over the L lanes of the caller's lane group (every lane of the warp must call it).
template <int L>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int o = L / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Calls f(std::integral_constant<int, L>{}) for the lanes per row L = 4, 8, 16 or 32 (launchers).
template <class F>
void with_lanes(int L, F&& f) {
  switch (L) {
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 8: f(std::integral_constant<int, 8>{}); break;
    case 16: f(std::integral_constant<int, 16>{}); break;
    default: f(std::integral_constant<int, 32>{}); break;
  }
}

// Lanes per weight row: the smallest power of two >= 4 whose first pass (L * kUnroll chunks)
// covers the row, 32 for rows longer than one pass of the warp.
inline int lanes_per_row(int64_t chunks) {
  int l = 4;
  while (l < 32 && static_cast<int64_t>(l) * kUnroll < chunks) l *= 2;
  return l;
}

}  // namespace fusedmoe::cuda::small_m
