#pragma once
// Pieces shared by the hand-written wgmma kernels (w4_wgmma.cu, w4a8_wgmma.cu): cp.async copies,
// the wgmma fences / commit / wait, the K-major 128-byte-swizzled shared-memory descriptor, the
// register fences that keep the compiler from moving accumulator or fragment code across an
// asynchronous wgmma, and the token-tile lookup over the experts' row offsets.
#include <cuda_runtime.h>

#include <cstdint>

namespace fusedmoe::cuda::wg {

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
// cp.async writes through the generic proxy; wgmma reads shared memory through the async proxy.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Shared-memory matrix descriptor of a K-major tile with 128-byte rows in the 128-byte swizzle
// (8-row groups 1024 bytes apart; the tile starts 1024-byte aligned; a 32-byte k step - k16 of a
// 16-bit type, k32 of fp8 - adds 32 bytes, i.e. 2, to the start address field).
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(1) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

template <int N>
__device__ __forceinline__ void fence_operand(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ void fence_regs(uint32_t (&r)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// The a-th token tile (TM rows) over the experts that have rows, in expert order: its expert and
// tile index inside the expert, or e = -1 past the last tile. Block-wide (every thread calls it):
// kThreads experts per step, tile counts prefix-summed across the block.
template <int kThreads, int TM>
__device__ __forceinline__ void find_tile(const int32_t* offsets, int groups, int a, int& e_out, int& tile_out) {
  __shared__ int warp_sums[kThreads / 32];
  __shared__ int found_e, found_tile;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (threadIdx.x == 0) found_e = -1;
  int seen = 0;
  for (int base = 0; base < groups; base += kThreads) {
    const int e = base + static_cast<int>(threadIdx.x);
    const int tiles = e < groups ? (__ldcg(offsets + e + 1) - __ldcg(offsets + e) + TM - 1) / TM : 0;
    int incl = tiles;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int y = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= d) incl += y;
    }
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    int before = seen, total = seen;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) {
      if (w < warp) before += warp_sums[w];
      total += warp_sums[w];
    }
    const int first = before + incl - tiles;
    if (tiles > 0 && a >= first && a < first + tiles) {
      found_e = e;
      found_tile = a - first;
    }
    __syncthreads();
    if (total > a) break;  // uniform
    seen = total;
  }
  e_out = found_e;
  tile_out = found_tile;
}

}  // namespace fusedmoe::cuda::wg
