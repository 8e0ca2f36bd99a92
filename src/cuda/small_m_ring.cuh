#pragma once
// A per-warp ring of weight passes in shared memory for the persistent small-M kernels.
//
// The weight-streaming kernels (small_m_dot.cuh) hold a pass of weights in registers: a warp
// loads one pass, waits a full memory latency, multiplies, and at decode sizes (one pass per
// weight row pair) exits; the next wave of blocks then pays the launch, the expert lookup and
// the latency again. ncu at M = 1 showed 1.0-1.4 TB/s with ~23% achieved occupancy. Here a warp
// walks a sequence of passes over several weight rows (persistent grid) and keeps the next S - 1
// passes in flight with cp.async into its own slots of shared memory, so there is no gap between
// one row pair and the next and in-flight bytes do not cost registers.
//
// Each lane copies exactly the chunks it later multiplies (the lane layout of load_pass), so a
// lane only waits for its own cp.async groups: no barrier between the lanes or the warps.
// Slot (stage, u, i, lane) is laid out lane-fastest: the 32 lanes' 16-byte reads of one (u, i)
// are one conflict-free shared-memory wavefront per 8 lanes.
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <string>
#include <mutex>
#include <utility>

#include "cuda/cuda_check.hpp"
#include "cuda/small_m_dot.cuh"

namespace fusedmoe::cuda::small_m {

// 16-byte chunks of one pass of one warp (kUnroll per weight row, kWarpRows rows, 32 lanes).
constexpr int kStageChunks = kUnroll * kWarpRows * 32;
constexpr int kStageBytes = kStageChunks * 16;

__device__ __forceinline__ void cp_async16(uint4* smem, const uint8_t* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  // .cg: weights are read once, keep them out of L1.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// Starts the copies of one pass (the chunks load_pass<L> would load into registers) into stage.
// Chunks past the row's end or of rows with ok[i] false are not copied (fma_pass never reads a
// chunk past the end; a row that is not ok is never stored).
template <int L>
__device__ __forceinline__ void issue_pass(uint4* stage, int lane, const uint8_t* const (&rows)[kWarpRows],
                                           const bool (&ok)[kWarpRows], int64_t c0, int64_t chunks) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t c = c0 + L * u;
#pragma unroll
    for (int i = 0; i < kWarpRows; ++i)
      if (c < chunks && ok[i]) cp_async16(stage + (u * kWarpRows + i) * 32 + lane, rows[i] + c * 16);
  }
}

// The pass in stage, as load_pass<L> would have left it in registers (for fma_pass).
__device__ __forceinline__ void read_pass(uint4 (&w)[kUnroll][kWarpRows], const uint4* stage, int lane) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u)
#pragma unroll
    for (int i = 0; i < kWarpRows; ++i) w[u][i] = stage[(u * kWarpRows + i) * 32 + lane];
}

// Blocks of a persistent grid of `kernel` on the current device: the SMs times the blocks that fit
// on one (threads, dynamic shared memory smem). The first call per kernel and device raises the
// kernel's dynamic shared memory limit (above 48 KB needs the opt-in) and caches the answer, so a
// launch inside stream capture makes no further runtime calls but this lookup.
inline int persistent_blocks(const void* kernel, int threads, size_t smem) {
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, int> cache;
  int dev = 0;
  FUSEDMOE_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(kernel, dev);
  const auto hit = cache.find(key);
  if (hit != cache.end()) return hit->second;
  FUSEDMOE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  int per_sm = 0, sms = 0;
  FUSEDMOE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  FUSEDMOE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  if (per_sm < 1)
    throw Error("small-M persistent kernel: no block of " + std::to_string(threads) + " threads and " +
                std::to_string(smem) + " bytes of shared memory fits on an SM");
  const int blocks = per_sm * sms;
  cache.emplace(key, blocks);
  return blocks;
}

}  // namespace fusedmoe::cuda::small_m
