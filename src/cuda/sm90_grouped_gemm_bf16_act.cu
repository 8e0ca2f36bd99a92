// GEMM1 + activation for bf16 operands (sm90_gated_act_epilogue.cuh): the large-M mainloop
// (Bf16LargeConfig) with the activation in the epilogue, writing the bf16 GEMM2 operand.
#include "cuda/sm90_gated_act_epilogue.cuh"
#include "cuda/sm90_grouped_gemm_configs.cuh"

namespace fusedmoe::cuda {
namespace {
using ActGemm = sm90::GroupedGemmAct<cutlass::bfloat16_t, sm90::Bf16LargeConfig>;
}  // namespace

size_t sm90_grouped_gemm_bf16_act_workspace(int groups, int sm_count) { return ActGemm::workspace_bytes(groups, sm_count); }

void sm90_grouped_gemm_bf16_act(const GroupedGemmArgs& args, const ActivationParams& act, cudaStream_t stream) {
  ActGemm::run(args, act, stream);
}

}  // namespace fusedmoe::cuda
