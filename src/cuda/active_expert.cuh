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

// The a-th expert that has rows (e = -1: none) with its rows [row0, row_end), for the GEMMs whose every block starts
// with this lookup before its first weight load (w4_gemm.cu's mma kernel): the rows come from the lookup's own loads,
// where active_expert's callers load offsets[e] again after it - a second dependent round trip to L2 per block. (Two
// experts per thread per step, to take 256 experts in one step at 128 threads, moved the mma kernel's registers:
// 80 -> 82 / 80 + 8 bytes of stack, k loops +-1%; not done.) Every thread gets the same result.
struct ExpertRows {
  int e, row0, row_end;
};
template <int kWarps>
__device__ __forceinline__ ExpertRows active_expert_rows(const int32_t* offsets, int groups, int a) {
  __shared__ int warp_counts[kWarps];
  __shared__ ExpertRows found;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (threadIdx.x == 0) found.e = -1;
  int seen = 0;
  for (int base = 0; base < groups; base += kWarps * 32) {
    const int e = base + static_cast<int>(threadIdx.x);
    const int lo = e < groups ? __ldcg(offsets + e) : 0, hi = e < groups ? __ldcg(offsets + e + 1) : 0;
    const unsigned m = __ballot_sync(0xffffffffu, hi > lo);
    if (lane == 0) warp_counts[warp] = __popc(m);
    __syncthreads();
    int before = seen, total = seen;
    for (int w = 0; w < kWarps; ++w) {
      if (w < warp) before += warp_counts[w];
      total += warp_counts[w];
    }
    if (hi > lo && before + __popc(m & ((1u << lane) - 1u)) == a) found = ExpertRows{e, lo, hi};
    __syncthreads();
    if (total > a) break;  // uniform: every thread has the same total
    seen = total;
  }
  // Copied out through a volatile read: with a plain one, ptxas scheduled some of the mma kernel's instances
  // differently (k loops of its 16 / 32-token tiles 2-3 instructions apart); this way all 23 keep their registers
  // and k loops (cuobjdump, 2026-11-28). row_end rather than a row count: the kernel's clamp of its activation rows
  // to row0 + rows - 1 then folds as it did with offsets[e + 1] loaded (with a count, 7 more 64-bit adds per k loop).
  const volatile ExpertRows* f = &found;
  return ExpertRows{f->e, f->row0, f->row_end};
}

}  // namespace fusedmoe::cuda
