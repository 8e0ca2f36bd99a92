#pragma once
// Kernels of the input layouts beyond the plain contiguous run (launchers on the caller's stream,
// no allocation, no host sync):
//   quantized_input.cu  pre-quantised fp8-block inputs (e4m3 codes + 1x128 group scales, as
//                       DeepGEMM takes them): the gather copies codes and scales into GEMM1's
//                       operand layout instead of quantising.
//   masked.cu           the batched/masked layout ([E, T, K] + per-expert counts): top-1 routing
//                       of the E*T rows to their expert, built on the device from the counts.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/moe_kernels.hpp"

namespace fusedmoe::cuda {

struct PrequantGatherParams {
  const uint8_t* x = nullptr;        // [M, K] e4m3 codes
  const float* x_scale = nullptr;    // [M, ceil(K/128)] row-major
  int64_t K = 0;
  int64_t topk = 1;
  const int32_t* row_slot = nullptr;  // [rows] slot of each row
  const int32_t* rows = nullptr;      // device row count (expert_offsets + E)
  uint8_t* out = nullptr;             // [rows, K] GEMM1 operand
  BlockScaleOut block;                // scales in the blockwise GEMM's layout (moe_kernels.hpp)
};
// Row r = slot i: copies token i / topk's codes to out[r] and its group scales to the BLOCK layout.
void launch_gather_prequantized(const PrequantGatherParams& p, int64_t max_rows, cudaStream_t stream);

// ids[e * T + t] = e when t < clamp(counts[e], 0, T), else -1; weights[e * T + t] = 1.
void launch_masked_routing(const int32_t* counts, int num_experts, int64_t T, int32_t* ids, float* weights,
                           cudaStream_t stream);

}  // namespace fusedmoe::cuda
