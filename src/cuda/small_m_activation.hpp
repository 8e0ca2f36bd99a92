#pragma once
// GEMM1 + activation in one kernel for decode-sized calls (small_m_activation.cu).
#include <cuda_runtime.h>

#include "cuda/grouped_gemm.hpp"
#include "cuda/moe_kernels.hpp"

namespace fusedmoe::cuda {

// Whether the fused kernel takes this GEMM1 (the small-M path's shapes) and this activation
// (gated, R == 2N, bf16 / fp16 conversion or static per-tensor fp8, dequant NONE or TENSOR).
bool small_m_activation_applies(const GroupedGemmArgs& g1, const ActivationParams& p);
// Which kernel small_m_gemm1_activation launches (run() uses AUTO; tests pin each one).
//   FMA: fp32 FMAs, the same bits as small_m_grouped_gemm + launch_activation.
//   MMA: tensor cores (mma.sync), sums in the MMA's order: within rounding of the FMA kernel.
//   AUTO: MMA for fp8 operands with at most kSmallMMmaMaxN activation outputs per expert, FMA
//   otherwise. Measured on an H100 (2026-11-21, bench/results/2026-11-21-h100-small-m-mma): fp8
//   layers at M = 1 8-10% faster on Qwen3 (N = 768) and DeepSeek-V3 TP8 (N = 256), 1% on TP1
//   (N = 2048) -- the FMA kernel converts every e4m3 value to fp32, ~900 instructions per warp per
//   4 KB -- but Mixtral (N = 14336) 1-3% slower; bf16 6-35% slower on every preset.
constexpr int64_t kSmallMMmaMaxN = 2048;
enum class SmallMActivationKernel { AUTO, FMA, MMA };

// p.out = activation(GEMM1): p.h is not used.
void small_m_gemm1_activation(const GroupedGemmArgs& g1, const ActivationParams& p, cudaStream_t stream,
                              SmallMActivationKernel kernel = SmallMActivationKernel::AUTO);

}  // namespace fusedmoe::cuda
