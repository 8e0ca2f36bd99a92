#pragma once
// A slot's local expert: ids outside [0, num_global) and ids the expert map sends to -1 or past
// the local range select nothing (-1). Shared by the plan kernels (permute.cu) and the one-token
// layer kernel (decode_layer.cu), so that both skip exactly the same slots.
#include <cuda_runtime.h>

#include <cstdint>

namespace fusedmoe::cuda {

// The local expert of global id g (already loaded).
__device__ __forceinline__ int32_t local_expert_of(int32_t g, const int32_t* emap, int E, int64_t num_global) {
  if (g < 0 || g >= num_global) return -1;
  const int32_t e = emap ? emap[g] : g;
  return (e >= 0 && e < E) ? e : -1;  // unmapped, or a map entry outside the local range
}

__device__ __forceinline__ int32_t local_expert(const int32_t* ids, const int32_t* emap, int64_t i, int E,
                                                int64_t num_global) {
  return local_expert_of(ids[i], emap, E, num_global);
}

}  // namespace fusedmoe::cuda
