// SM90 grouped GEMM instances for e4m3 operands with a bf16 D: the large-M configs of
// sm90_grouped_gemm_fp8.cu (cooperative 128x256, pingpong 128x128 for short K, both
// FP8FastAccum), writing the layer's unscaled GEMM2 output y rounded to bf16
// (sm90_bf16_d_applies in grouped_gemm.hpp; bf16 keeps fp32's exponent range, so the unscaled
// fp8 products cannot overflow it). Their own file: each instance costs about a minute and
// several GB of compiler memory.
#include <algorithm>

#include "cuda/sm90_grouped_gemm_configs.cuh"

namespace fusedmoe::cuda {
namespace {
using LargeGemm = sm90::GroupedGemm<cutlass::float_e4m3_t, sm90::Fp8LargeConfig, false, cutlass::bfloat16_t>;
using PingpongGemm = sm90::GroupedGemm<cutlass::float_e4m3_t, sm90::Fp8PingpongConfig, false, cutlass::bfloat16_t>;
}  // namespace

size_t sm90_grouped_gemm_fp8_d16_workspace(int groups, int sm_count) {
  return std::max(LargeGemm::workspace_bytes(groups, sm_count), PingpongGemm::workspace_bytes(groups, sm_count));
}

void sm90_grouped_gemm_fp8_d16(const GroupedGemmArgs& args, cudaStream_t stream) {
  if (sm90_use_pingpong_config(args)) PingpongGemm::run(args, stream);
  else LargeGemm::run(args, stream);
}

}  // namespace fusedmoe::cuda
