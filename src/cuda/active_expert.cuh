#pragma once
// Blocks laid out over active experts (blockIdx.y = a -> the a-th expert that has rows), so the
// weight-streaming GEMMs (small_m_gemm.cu, w4_gemm.cu) launch no blocks for empty experts.
#include <cstdint>

namespace fusedmoe::cuda {

// The a-th expert (in expert order) that has rows, or -1. Block-wide: every thread of the block
// (kWarps warps) calls it and gets the result. blockDim.x experts are tested per step, all loads
// of a step in flight at once (a warp-serial scan over 256 experts cost several microseconds of
// latency per block). Loads through L2 (ld.global.cg): small_m_gemm_kernel calls it before its
// chain_wait().
template <int kWarps>
__device__ __forceinline__ int active_expert(const int32_t* offsets, int groups, int a) {
  __shared__ int warp_counts[kWarps];
  __shared__ int found;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (threadIdx.x == 0) found = -1;
  int seen = 0;
  for (int base = 0; base < groups; base += kWarps * 32) {
    const int e = base + static_cast<int>(threadIdx.x);
    const bool has = e < groups && __ldcg(offsets + e + 1) > __ldcg(offsets + e);
    const unsigned m = __ballot_sync(0xffffffffu, has);
    if (lane == 0) warp_counts[warp] = __popc(m);
    __syncthreads();
    int before = seen, total = seen;
    for (int w = 0; w < kWarps; ++w) {
      if (w < warp) before += warp_counts[w];
      total += warp_counts[w];
    }
    if (has && before + __popc(m & ((1u << lane) - 1u)) == a) found = e;
    __syncthreads();
    if (total > a) break;  // uniform: every thread has the same total
    seen = total;
  }
  return found;
}

}  // namespace fusedmoe::cuda
