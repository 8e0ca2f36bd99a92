// Random weights and tokens generated on the GPU (a hash of the index, no host round trip):
// DeepSeek-V3's routed experts are 11 GB in fp8, too much to draw on the host.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "fill.hpp"

namespace epbench {
namespace {

__device__ __forceinline__ uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}
// Uniform in [-1, 1).
__device__ __forceinline__ float unif(uint64_t seed, uint64_t i) {
  return static_cast<float>(mix(seed * 0x9E3779B97F4A7C15ULL + i) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void fill_bf16_kernel(__nv_bfloat16* p, size_t n, uint64_t seed, float amp) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16_rn(amp * unif(seed, i));
}
__global__ void fill_e4m3_kernel(uint8_t* p, size_t n, uint64_t seed, float amp) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(amp * unif(seed, i), __NV_SATFINITE, __NV_E4M3));
}
__global__ void fill_f32_kernel(float* p, size_t n, float v) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] = v;
}

unsigned grid(size_t n) { return static_cast<unsigned>(n / 256 + 1 < 65536 ? n / 256 + 1 : 65536); }

}  // namespace

void fill_bf16(void* p, size_t n, uint64_t seed, float amp, cudaStream_t s) {
  fill_bf16_kernel<<<grid(n), 256, 0, s>>>(static_cast<__nv_bfloat16*>(p), n, seed, amp);
}
void fill_e4m3(void* p, size_t n, uint64_t seed, float amp, cudaStream_t s) {
  fill_e4m3_kernel<<<grid(n), 256, 0, s>>>(static_cast<uint8_t*>(p), n, seed, amp);
}
void fill_f32(void* p, size_t n, float v, cudaStream_t s) {
  fill_f32_kernel<<<grid(n), 256, 0, s>>>(static_cast<float*>(p), n, v);
}

}  // namespace epbench
