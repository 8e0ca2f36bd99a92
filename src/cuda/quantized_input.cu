// Pre-quantised fp8-block inputs: GEMM1's operand is the caller's e4m3 codes and 1x128 group
// scales, used as given (no re-quantisation). The gather copies the codes of each row's token
// into the expert-grouped operand and its scales into the layout of the blockwise grouped GEMM
// (column-major [groups, rows_e] per expert, see BlockScaleOut).
#include <cuda_runtime.h>

#include "cuda/api_kernels.hpp"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.hpp"
#include "cuda/device_utils.cuh"

namespace fusedmoe::cuda {
namespace {

constexpr int kThreads = 128;

// One block per row (surplus blocks past the device row count exit at once).
__global__ void gather_prequantized_kernel(PrequantGatherParams p, bool vec16) {
  chain_wait();
  const int64_t r = blockIdx.x;
  if (r >= load_rows(p.rows)) return;
  const int64_t t = p.row_slot[r] / p.topk;
  const uint8_t* src = p.x + t * p.K;
  uint8_t* dst = p.out + r * p.K;
  if (vec16) {
    const uint4* s4 = reinterpret_cast<const uint4*>(src);
    uint4* d4 = reinterpret_cast<uint4*>(dst);
    for (int64_t j = threadIdx.x; j < p.K / 16; j += blockDim.x) d4[j] = s4[j];
  } else {
    for (int64_t k = threadIdx.x; k < p.K; k += blockDim.x) dst[k] = src[k];
  }
  const int64_t groups = (p.K + kFp8Block - 1) / kFp8Block;
  for (int64_t g = threadIdx.x; g < groups; g += blockDim.x)
    p.block.scale[block_scale_index(p.block, r, g, groups)] = p.x_scale[t * groups + g];
}

}  // namespace

void launch_gather_prequantized(const PrequantGatherParams& p, int64_t max_rows, cudaStream_t stream) {
  if (max_rows <= 0) return;
  const bool vec16 = p.K % 16 == 0 && reinterpret_cast<uintptr_t>(p.x) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(p.out) % 16 == 0;
  launch_chained(gather_prequantized_kernel, static_cast<unsigned>(max_rows), kThreads, 0, stream, p, vec16);
}

}  // namespace fusedmoe::cuda
