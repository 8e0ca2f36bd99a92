// GEMM1 + activation for e4m3 operands (fp8-tensor: dequant a x w[e], static fp8 output scale;
// sm90_gated_act_epilogue.cuh): the large-M mainloop (Fp8LargeConfig, FP8FastAccum) with the
// activation in the epilogue.
#include "cuda/sm90_gated_act_epilogue.cuh"
#include "cuda/sm90_grouped_gemm_configs.cuh"

namespace fusedmoe::cuda {
namespace {
using ActGemm = sm90::GroupedGemmAct<cutlass::float_e4m3_t, sm90::Fp8LargeConfig>;
}  // namespace

size_t sm90_grouped_gemm_fp8_act_workspace(int groups, int sm_count) { return ActGemm::workspace_bytes(groups, sm_count); }

void sm90_grouped_gemm_fp8_act(const GroupedGemmArgs& args, const ActivationParams& act, cudaStream_t stream) {
  ActGemm::run(args, act, stream);
}

}  // namespace fusedmoe::cuda
