// GEMM1 + activation for bf16 operands (sm90_gated_act_epilogue.cuh): the large-M mainloop
// (Bf16LargeConfig) with the activation in the epilogue, writing the bf16 GEMM2 operand.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "cuda/sm90_gated_act_epilogue.cuh"
#include "cuda/sm90_grouped_gemm_configs.cuh"

namespace fusedmoe::cuda {
namespace {
using ActGemm = sm90::GroupedGemmAct<cutlass::bfloat16_t, sm90::Bf16LargeConfig>;
// An experiment (FUSEDMOE_GEMM1_CLUSTER_M=1, interleaved layers without the gather): the same tile on
// clusters of two CTAs along M that share each weight tile through TMA multicast, so an expert's
// M tiles of one column read their B tile from DRAM once (ncu, bench/results/2026-11-27-h100-padding-ncu:
// Mixtral-8x7B's GEMM1 at 1024 tokens reads 1.3x its weights under uniform routing).
using ClusterConfig = sm90::TileConfig<cute::Shape<cute::_128, cute::_256, cute::_64>, cute::Shape<cute::_2, cute::_1, cute::_1>,
                                       cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                                       cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
using ClusterActGemm = sm90::GroupedGemmAct<cutlass::bfloat16_t, ClusterConfig>;
bool cluster_m2() {
  static const bool on = [] {
    const char* e = std::getenv("FUSEDMOE_GEMM1_CLUSTER_M");
    return e != nullptr && std::string(e) == "1";
  }();
  return on;
}
}  // namespace

size_t sm90_grouped_gemm_bf16_act_workspace(int groups, int sm_count) {
  return std::max(ActGemm::workspace_bytes(groups, sm_count), ClusterActGemm::workspace_bytes(groups, sm_count));
}

void sm90_grouped_gemm_bf16_act(const GroupedGemmArgs& args, const ActivationParams& act, cudaStream_t stream) {
  if (cluster_m2() && act.interleaved && args.gather_x == nullptr) ClusterActGemm::run(args, act, stream);
  else ActGemm::run(args, act, stream);
}

}  // namespace fusedmoe::cuda
