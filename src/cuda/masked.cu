// The batched/masked layout ([E, T, K] rows grouped by expert + per-expert counts on the device)
// runs through the contiguous pipeline as E*T "tokens" with top-1 routing: row (e, t) selects
// expert e when t < count[e] (clamped to [0, T]) and nothing otherwise (finalize then writes
// zeros), with router weight 1. This kernel writes those ids and weights from the device counts,
// so the host never learns them (no sync, graph capturable).
#include <cuda_runtime.h>

#include <algorithm>

#include "cuda/api_kernels.hpp"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.hpp"

namespace fusedmoe::cuda {
namespace {

__global__ void masked_routing_kernel(const int32_t* counts, int E, int64_t T, int32_t* ids, float* weights) {
  chain_wait();
  const int64_t n = static_cast<int64_t>(E) * T;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e = i / T, t = i - e * T;
    const int64_t c = counts[e];  // negative: no rows; above T: all T rows
    ids[i] = t < c ? static_cast<int32_t>(e) : -1;
    weights[i] = 1.0f;
  }
}

}  // namespace

void launch_masked_routing(const int32_t* counts, int num_experts, int64_t T, int32_t* ids, float* weights,
                           cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(num_experts) * T;
  if (n <= 0) return;
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 4096);
  launch_chained(masked_routing_kernel, static_cast<unsigned>(blocks), 256, 0, stream,
                 counts, num_experts, T, ids, weights);
}

}  // namespace fusedmoe::cuda
