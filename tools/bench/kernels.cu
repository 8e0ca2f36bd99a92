// Device kernels of the benchmark. Nothing here is timed except hbm_read (a ceiling).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "common.hpp"
#include "kernels.hpp"

namespace fmbench {
namespace {

using fusedmoe::DType;

// splitmix64's output function: a bijective 64-bit mixer.
__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

__device__ __forceinline__ uint64_t hash2(uint64_t seed, uint64_t i) {
  return mix64(seed ^ mix64(i + 0x9e3779b97f4a7c15ULL));
}

// Uniform in [0, 1) with 24 random bits.
__device__ __forceinline__ float unit(uint64_t h) { return static_cast<float>(h >> 40) * (1.0f / 16777216.0f); }

int grid_for(size_t n, int threads) {
  const size_t want = (n + threads - 1) / threads;
  return static_cast<int>(std::min<size_t>(want == 0 ? 1 : want, 132 * 32));
}

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __nv_fp8_storage_t from_float<__nv_fp8_storage_t>(float v) {
  return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}

template <typename T>
__global__ void gen_uniform_kernel(T* out, size_t n, uint64_t seed, float lo, float span) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = from_float<T>(lo + span * unit(hash2(seed, i)));
}

__global__ void gen_bytes_kernel(uint8_t* out, size_t n, uint64_t seed) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  // 8 bytes per hash.
  const size_t words = (n + 7) / 8;
  for (size_t w = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < words; w += stride) {
    const uint64_t h = hash2(seed, w);
    const size_t base = w * 8;
    for (int b = 0; b < 8 && base + b < n; ++b) out[base + b] = static_cast<uint8_t>(h >> (8 * b));
  }
}

__global__ void gen_e8m0_kernel(uint8_t* out, size_t n, uint64_t seed, int base_code, int spread) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int r = static_cast<int>(hash2(seed, i) % static_cast<uint64_t>(2 * spread + 1)) - spread;
    out[i] = static_cast<uint8_t>(min(254, max(1, base_code + r)));
  }
}

template <typename T>
__global__ void set_column0_kernel(T* data, int64_t rows, int64_t cols, float v) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += stride)
    data[r * cols] = from_float<T>(v);
}

// kAllocate: L2-allocating loads (ld.global.cg, the read flush) instead of streaming ones
// (ld.global.cs, the read ceiling).
template <int UNROLL, bool kAllocate = false>
__global__ void hbm_read_kernel(const uint4* __restrict__ p, size_t n, unsigned long long* sink) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  auto load = [](const uint4* q) { return kAllocate ? __ldcg(q) : __ldcs(q); };
  uint32_t acc = 0;
  for (; i + (UNROLL - 1) * stride < n; i += UNROLL * stride) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) v[u] = load(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = load(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u && threadIdx.x == 1023) atomicAdd(sink, 1ULL);
}

template <typename Bits>
__global__ void nonfinite_kernel(const Bits* data, size_t n, Bits exp_mask, unsigned long long* counter) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    local += (data[i] & exp_mask) == exp_mask;
  // Warp reduction, then one atomic per warp that saw something.
  for (int off = 16; off > 0; off >>= 1) local += __shfl_down_sync(0xffffffffu, local, off);
  if ((threadIdx.x & 31) == 0 && local) atomicAdd(counter, local);
}

}  // namespace

void gen_uniform(void* out, DType dtype, size_t n, uint64_t seed, float lo, float hi, cudaStream_t stream) {
  if (n == 0) return;
  const int threads = 256;
  const int grid = grid_for(n, threads);
  const float span = hi - lo;
  switch (dtype) {
    case DType::F32: gen_uniform_kernel<<<grid, threads, 0, stream>>>(static_cast<float*>(out), n, seed, lo, span); break;
    case DType::F16: gen_uniform_kernel<<<grid, threads, 0, stream>>>(static_cast<__half*>(out), n, seed, lo, span); break;
    case DType::BF16:
      gen_uniform_kernel<<<grid, threads, 0, stream>>>(static_cast<__nv_bfloat16*>(out), n, seed, lo, span);
      break;
    case DType::F8_E4M3:
      gen_uniform_kernel<<<grid, threads, 0, stream>>>(static_cast<__nv_fp8_storage_t*>(out), n, seed, lo, span);
      break;
    default: throw std::invalid_argument("gen_uniform: unsupported dtype");
  }
  FMB_LAUNCH_CHECK();
}

void gen_bytes(uint8_t* out, size_t n, uint64_t seed, cudaStream_t stream) {
  if (n == 0) return;
  const int threads = 256;
  gen_bytes_kernel<<<grid_for((n + 7) / 8, threads), threads, 0, stream>>>(out, n, seed);
  FMB_LAUNCH_CHECK();
}

void gen_e8m0(uint8_t* out, size_t n, uint64_t seed, int base_code, int spread, cudaStream_t stream) {
  if (n == 0) return;
  const int threads = 256;
  gen_e8m0_kernel<<<grid_for(n, threads), threads, 0, stream>>>(out, n, seed, base_code, std::max(0, spread));
  FMB_LAUNCH_CHECK();
}

void set_column0(void* data, DType dtype, int64_t rows, int64_t cols, float v, cudaStream_t stream) {
  if (rows == 0) return;
  const int threads = 256;
  const int grid = grid_for(static_cast<size_t>(rows), threads);
  switch (dtype) {
    case DType::F32: set_column0_kernel<<<grid, threads, 0, stream>>>(static_cast<float*>(data), rows, cols, v); break;
    case DType::F16: set_column0_kernel<<<grid, threads, 0, stream>>>(static_cast<__half*>(data), rows, cols, v); break;
    case DType::BF16:
      set_column0_kernel<<<grid, threads, 0, stream>>>(static_cast<__nv_bfloat16*>(data), rows, cols, v);
      break;
    default: throw std::invalid_argument("set_column0: unsupported dtype");
  }
  FMB_LAUNCH_CHECK();
}

void hbm_read(const void* data, size_t bytes, int blocks, int threads, int unroll, unsigned long long* sink,
              cudaStream_t stream) {
  const uint4* p = static_cast<const uint4*>(data);
  const size_t n = bytes / 16;
  switch (unroll) {
    case 1: hbm_read_kernel<1><<<blocks, threads, 0, stream>>>(p, n, sink); break;
    case 2: hbm_read_kernel<2><<<blocks, threads, 0, stream>>>(p, n, sink); break;
    case 4: hbm_read_kernel<4><<<blocks, threads, 0, stream>>>(p, n, sink); break;
    case 8: hbm_read_kernel<8><<<blocks, threads, 0, stream>>>(p, n, sink); break;
    default: throw std::invalid_argument("hbm_read: unroll must be 1, 2, 4 or 8");
  }
  FMB_LAUNCH_CHECK();
}

void l2_flush_read(const void* data, size_t bytes, unsigned long long* sink, cudaStream_t stream) {
  // A few waves of 512-thread blocks on any Hopper part; the flush is not timed.
  hbm_read_kernel<1, true><<<1056, 512, 0, stream>>>(static_cast<const uint4*>(data), bytes / 16, sink);
  FMB_LAUNCH_CHECK();
}

void count_nonfinite(const void* data, DType dtype, size_t n, unsigned long long* counter, cudaStream_t stream) {
  if (n == 0) return;
  const int threads = 256;
  const int grid = grid_for(n, threads);
  switch (dtype) {
    case DType::F32:
      nonfinite_kernel<uint32_t><<<grid, threads, 0, stream>>>(static_cast<const uint32_t*>(data), n, 0x7f800000u, counter);
      break;
    case DType::F16:
      nonfinite_kernel<uint16_t><<<grid, threads, 0, stream>>>(static_cast<const uint16_t*>(data), n,
                                                               static_cast<uint16_t>(0x7c00u), counter);
      break;
    case DType::BF16:
      nonfinite_kernel<uint16_t><<<grid, threads, 0, stream>>>(static_cast<const uint16_t*>(data), n,
                                                               static_cast<uint16_t>(0x7f80u), counter);
      break;
    default: throw std::invalid_argument("count_nonfinite: unsupported dtype");
  }
  FMB_LAUNCH_CHECK();
}

}  // namespace fmbench
