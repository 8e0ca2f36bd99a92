// SIMT grouped GEMM: D[rows of g] = A[rows of g] x B[g]^T with fp32 FMAs in k order.
// It is the exact path of the FP32 format (no tf32), and the fallback of the other operand
// types when TMA cannot address the operands (k or n not a multiple of 16 bytes, unaligned
// weights). Simple on purpose: 64x64 tiles, 16-deep k steps, 4x4 outputs per thread.
//
// Tiles never straddle experts: the plan gives each expert ceil(rows / 64) tiles
// (tile_offsets), and a block finds its expert by binary search.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.hpp"
#include "cuda/grouped_gemm.hpp"

namespace fusedmoe::cuda {
namespace {

constexpr int kTileM = kSimtTileM;
constexpr int kTileN = 64;
constexpr int kTileK = 16;
constexpr int kThreads = 256;
constexpr int kPerThread = 4;  // rows and columns per thread
static_assert(kTileM == (kThreads / (kTileN / kPerThread)) * kPerThread, "thread grid must cover the M tile");
static_assert(kTileM * kTileK % kThreads == 0 && kTileN * kTileK % kThreads == 0, "tile loads split evenly");

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_fp8_e4m3 v) { return static_cast<float>(v); }

template <typename T>
__global__ void __launch_bounds__(kThreads) simt_grouped_gemm_kernel(const T* __restrict__ a, const T* __restrict__ b,
                                                                     float* __restrict__ d, int64_t n, int64_t k,
                                                                     int groups, const int32_t* offsets,
                                                                     const int32_t* tile_offsets) {
  chain_wait();
  __shared__ float as[kTileK][kTileM + 4];
  __shared__ float bs[kTileK][kTileN + 4];
  const int tile = blockIdx.x;
  if (tile >= tile_offsets[groups]) return;
  int lo = 0, hi = groups - 1;  // last expert whose first tile is <= tile
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tile_offsets[mid] <= tile) lo = mid;
    else hi = mid - 1;
  }
  const int g = lo;
  const int64_t row0 = offsets[g] + static_cast<int64_t>(tile - tile_offsets[g]) * kTileM;
  const int64_t row_end = offsets[g + 1];
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * kTileN;
  const T* bg = b + static_cast<int64_t>(g) * n * k;
  const int tx = threadIdx.x % (kTileN / kPerThread), ty = threadIdx.x / (kTileN / kPerThread);

  float acc[kPerThread][kPerThread] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kTileK) {
#pragma unroll
    for (int j = 0; j < kTileM * kTileK / kThreads; ++j) {
      const int idx = threadIdx.x + j * kThreads;
      const int r = idx / kTileK, kk = idx % kTileK;
      const int64_t row = row0 + r, kc = k0 + kk;
      as[kk][r] = (row < row_end && kc < k) ? to_float(a[row * k + kc]) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kTileN * kTileK / kThreads; ++j) {
      const int idx = threadIdx.x + j * kThreads;
      const int c = idx / kTileK, kk = idx % kTileK;
      const int64_t col = col0 + c, kc = k0 + kk;
      bs[kk][c] = (col < n && kc < k) ? to_float(bg[col * k + kc]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      float av[kPerThread], bv[kPerThread];
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) av[i] = as[kk][ty * kPerThread + i];
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) bv[j] = bs[kk][tx * kPerThread + j];
#pragma unroll
      for (int i = 0; i < kPerThread; ++i)
#pragma unroll
        for (int j = 0; j < kPerThread; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int64_t row = row0 + ty * kPerThread + i;
    if (row >= row_end) continue;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int64_t col = col0 + tx * kPerThread + j;
      if (col < n) d[row * n + col] = acc[i][j];
    }
  }
}

template <typename T>
void launch(const GroupedGemmArgs& g, cudaStream_t stream) {
  // Each expert adds at most one partial tile to the full tiles of all rows.
  const int64_t max_tiles = (g.max_rows + kTileM - 1) / kTileM + std::min<int64_t>(g.groups, g.max_rows);
  const dim3 grid(static_cast<unsigned>(max_tiles), static_cast<unsigned>((g.n + kTileN - 1) / kTileN));
  launch_chained(simt_grouped_gemm_kernel<T>, grid, kThreads, 0, stream, static_cast<const T*>(g.a),
                 static_cast<const T*>(g.b), static_cast<float*>(g.d), g.n, g.k, g.groups, g.expert_offsets,
                 g.tile_offsets);
}

}  // namespace

void simt_grouped_gemm(const GroupedGemmArgs& g, cudaStream_t stream) {
  switch (g.op) {
    case Operand::FP32: launch<float>(g, stream); break;
    case Operand::BF16: launch<__nv_bfloat16>(g, stream); break;
    case Operand::FP16: launch<__half>(g, stream); break;
    case Operand::FP8: launch<__nv_fp8_e4m3>(g, stream); break;
  }
}

}  // namespace fusedmoe::cuda
