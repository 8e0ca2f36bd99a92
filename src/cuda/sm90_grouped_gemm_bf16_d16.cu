// SM90 grouped GEMM instance for bf16 operands with a bf16 D: the cooperative 128x256 config of
// sm90_grouped_gemm_bf16.cu, also for short K (with the half-size D store it beat the pingpong
// one: sm90_use_pingpong_config), writing the layer's GEMM2 output y rounded to bf16
// (sm90_bf16_d_applies in grouped_gemm.hpp). Its own file: each instance costs about a minute and
// several GB of compiler memory.
#include "cuda/sm90_grouped_gemm_configs.cuh"

namespace fusedmoe::cuda {
namespace {
using LargeGemm = sm90::GroupedGemm<cutlass::bfloat16_t, sm90::Bf16LargeConfig, cutlass::bfloat16_t>;
}  // namespace

size_t sm90_grouped_gemm_bf16_d16_workspace(int groups, int sm_count) {
  return LargeGemm::workspace_bytes(groups, sm_count);
}

void sm90_grouped_gemm_bf16_d16(const GroupedGemmArgs& args, cudaStream_t stream) {
  LargeGemm::run(args, stream);
}

}  // namespace fusedmoe::cuda
