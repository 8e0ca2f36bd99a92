#pragma once
// GEMM1 + activation in one kernel for decode-sized calls (small_m_activation.cu).
#include <cuda_runtime.h>

#include "cuda/grouped_gemm.hpp"
#include "cuda/moe_kernels.hpp"

namespace fusedmoe::cuda {

// Whether the fused kernel takes this GEMM1 (the small-M path's shapes) and this activation
// (gated, R == 2N, bf16 / fp16 conversion or static per-tensor fp8, dequant NONE or TENSOR).
bool small_m_activation_applies(const GroupedGemmArgs& g1, const ActivationParams& p);
// Which kernel small_m_gemm1_activation launches. run() uses the default; tests pin each variant
// and shrink the persistent grid so that every warp walks several items.
struct SmallMActivationKernel {
  // 0: one block per (8 outputs, active expert), one pass in registers (small_m_activation_kernel);
  // 2, 3 or 4: the persistent kernel with that many passes per warp in its shared-memory ring.
  int ring_stages = 3;
  int max_blocks = 0;  // persistent grid at most this many blocks (0: as many as fit on the GPU)
};

// p.out = activation(GEMM1): p.h is not used. Same bits as small_m_grouped_gemm + launch_activation.
void small_m_gemm1_activation(const GroupedGemmArgs& g1, const ActivationParams& p, cudaStream_t stream,
                              SmallMActivationKernel kernel = {});

}  // namespace fusedmoe::cuda
