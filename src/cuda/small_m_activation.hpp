#pragma once
// GEMM1 + activation in one kernel for decode-sized calls (small_m_activation.cu).
#include <cuda_runtime.h>

#include "cuda/grouped_gemm.hpp"
#include "cuda/moe_kernels.hpp"

namespace fusedmoe::cuda {

// Whether the fused kernel takes this GEMM1 (the small-M path's shapes) and this activation
// (gated, R == 2N, bf16 / fp16 conversion or static per-tensor fp8, dequant NONE or TENSOR).
bool small_m_activation_applies(const GroupedGemmArgs& g1, const ActivationParams& p);
// Which kernel small_m_gemm1_activation launches (run() uses the default; tests pin each one).
struct SmallMActivationKernel {
  // true: tensor cores (mma.sync), sums in the MMA's order, so within rounding of the FMA
  // kernel's bits; false: fp32 FMAs, the same bits as small_m_grouped_gemm + launch_activation.
  bool mma = true;
};

// p.out = activation(GEMM1): p.h is not used.
void small_m_gemm1_activation(const GroupedGemmArgs& g1, const ActivationParams& p, cudaStream_t stream,
                              SmallMActivationKernel kernel = {});

}  // namespace fusedmoe::cuda
