// SM90 grouped GEMM instances for bf16 operands (format bf16). See sm90_grouped_gemm.cuh.
// Instances: a cooperative 128x256 tile, and a pingpong 128x128 tile for short K
// (sm90_use_pingpong_config). Few rows per expert (sm90_use_small_config) run on the stream GEMM
// (stream_gemm.cu) instead; its swap-AB 128x64 instance was removed on 2026-11-26.
#include <algorithm>

#include "cuda/sm90_grouped_gemm_configs.cuh"

namespace fusedmoe::cuda {
namespace {
using namespace cute;

// Pingpong: each consumer warpgroup a whole 128x128 tile, epilogues overlapping the other's MMAs
// (large-M GEMMs with short K and an fp32 D, sm90_use_pingpong_config).
using PingpongConfig = sm90::TileConfig<Shape<_128, _128, _64>, Shape<_1, _1, _1>,
                                        cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                                        cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong>;
using LargeGemm = sm90::GroupedGemm<cutlass::bfloat16_t, sm90::Bf16LargeConfig>;
using PingpongGemm = sm90::GroupedGemm<cutlass::bfloat16_t, PingpongConfig>;
}  // namespace

size_t sm90_grouped_gemm_bf16_workspace(int groups, int sm_count) {
  return std::max(LargeGemm::workspace_bytes(groups, sm_count), PingpongGemm::workspace_bytes(groups, sm_count));
}

void sm90_grouped_gemm_bf16(const GroupedGemmArgs& args, cudaStream_t stream) {
  if (sm90_use_pingpong_config(args)) {
    PingpongGemm::run(args, stream);
  } else {
    LargeGemm::run(args, stream);
  }
}

}  // namespace fusedmoe::cuda
