// SM90 grouped GEMM instance for e4m3 operands with a bf16 D: the cooperative 128x256
// FP8FastAccum config of sm90_grouped_gemm_fp8.cu, also for short K (with the half-size D store it
// beat the pingpong one: sm90_use_pingpong_config), writing the layer's unscaled GEMM2 output y
// rounded to bf16 (sm90_bf16_d_applies in grouped_gemm.hpp; bf16 keeps fp32's exponent range, so
// the unscaled fp8 products cannot overflow it). Its own file: each instance costs about a minute
// and several GB of compiler memory.
#include "cuda/sm90_grouped_gemm_configs.cuh"

namespace fusedmoe::cuda {
namespace {
using LargeGemm = sm90::GroupedGemm<cutlass::float_e4m3_t, sm90::Fp8LargeConfig, cutlass::bfloat16_t>;
}  // namespace

size_t sm90_grouped_gemm_fp8_d16_workspace(int groups, int sm_count) {
  return LargeGemm::workspace_bytes(groups, sm_count);
}

void sm90_grouped_gemm_fp8_d16(const GroupedGemmArgs& args, cudaStream_t stream) {
  LargeGemm::run(args, stream);
}

}  // namespace fusedmoe::cuda
