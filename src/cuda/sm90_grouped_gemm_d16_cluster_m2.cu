// SM90 grouped GEMM instances with a bf16 D on clusters of two CTAs along M (bf16 and fp8 operands):
// the cooperative 128x256 configs of sm90_grouped_gemm_configs.cuh, each cluster's two M tiles of one
// expert sharing their weight (B) tile through TMA multicast. An experiment (FUSEDMOE_GEMM2_CLUSTER_M=1,
// grouped_gemm.cpp): under uniform routing the experts' last, nearly empty 128-row tiles cost a whole
// B tile of traffic each (bench/results/2026-11-27-h100-padding-probe, -tail-skip); with the pair
// sharing B, an odd tile count costs one more tile of MMAs but no more B traffic.
#include <algorithm>

#include "cuda/sm90_grouped_gemm_configs.cuh"

namespace fusedmoe::cuda {
namespace {
using ClusterM2 = cute::Shape<cute::_2, cute::_1, cute::_1>;
using Bf16Config = sm90::TileConfig<cute::Shape<cute::_128, cute::_256, cute::_64>, ClusterM2,
                                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
using Fp8Config = sm90::TileConfig<cute::Shape<cute::_128, cute::_256, cute::_128>, ClusterM2,
                                   cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8FastAccum,
                                   cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
using Bf16Gemm = sm90::GroupedGemm<cutlass::bfloat16_t, Bf16Config, cutlass::bfloat16_t>;
using Fp8Gemm = sm90::GroupedGemm<cutlass::float_e4m3_t, Fp8Config, cutlass::bfloat16_t>;
}  // namespace

size_t sm90_grouped_gemm_d16_cluster_m2_workspace(int groups, int sm_count) {
  return std::max(Bf16Gemm::workspace_bytes(groups, sm_count), Fp8Gemm::workspace_bytes(groups, sm_count));
}

void sm90_grouped_gemm_d16_cluster_m2(const GroupedGemmArgs& args, cudaStream_t stream) {
  if (args.op == Operand::BF16) Bf16Gemm::run(args, stream);
  else Fp8Gemm::run(args, stream);
}

}  // namespace fusedmoe::cuda
