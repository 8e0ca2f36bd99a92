#pragma once
// GEMM2 + finalize in one kernel for decode-sized calls (small_m_finalize.cu).
#include <cuda_runtime.h>

#include "cuda/grouped_gemm.hpp"
#include "cuda/moe_kernels.hpp"

namespace fusedmoe::cuda {

// Whether the fused kernel takes this GEMM2 (y = a2 x W2^T, the small-M path's shapes) and this
// finalize (K == g2.n, topk <= 64, no 4-bit dequant).
bool small_m_finalize_applies(const GroupedGemmArgs& g2, const FinalizeParams& p);
// out = finalize(GEMM2): p.y is not used. Same bits as small_m_grouped_gemm + launch_finalize
// (block_scaled: the fp8-block GEMM2, as small_m_grouped_gemm(g2, stream, true)).
void small_m_gemm2_finalize(const GroupedGemmArgs& g2, const FinalizeParams& p, cudaStream_t stream,
                            bool block_scaled = false);

}  // namespace fusedmoe::cuda
