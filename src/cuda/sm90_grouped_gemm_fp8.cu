// SM90 grouped GEMM instances for e4m3 x e4m3 operands (formats fp8-tensor and fp8-channel:
// their per-tensor / per-channel / per-token scales are applied by the next stage, so these
// instances serve both). See sm90_grouped_gemm.cuh.
// Instances: a cooperative 128x256 tile, and a pingpong 128x128 tile for short K
// (sm90_use_pingpong_config). Few rows per expert (sm90_use_small_config) run on the stream GEMM
// (stream_gemm.cu) instead; its swap-AB 128x64 and 256x64 instances were removed on 2026-11-26.
#include <algorithm>

#include "cuda/sm90_grouped_gemm_configs.cuh"

namespace fusedmoe::cuda {
namespace {
using namespace cute;
// Both configs (sm90_grouped_gemm_configs.cuh and the pingpong one below) use FP8FastAccum.
// Pingpong: each consumer warpgroup a whole 128x128 tile, epilogues overlapping the other's MMAs
// (large-M GEMMs with short K and an fp32 D, sm90_use_pingpong_config); FP8FastAccum as the
// large config.
using PingpongConfig = sm90::TileConfig<Shape<_128, _128, _128>, Shape<_1, _1, _1>,
                                        cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8FastAccum,
                                        cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong>;
using LargeGemm = sm90::GroupedGemm<cutlass::float_e4m3_t, sm90::Fp8LargeConfig>;
using PingpongGemm = sm90::GroupedGemm<cutlass::float_e4m3_t, PingpongConfig>;
}  // namespace

size_t sm90_grouped_gemm_fp8_workspace(int groups, int sm_count) {
  return std::max(LargeGemm::workspace_bytes(groups, sm_count), PingpongGemm::workspace_bytes(groups, sm_count));
}

void sm90_grouped_gemm_fp8(const GroupedGemmArgs& args, cudaStream_t stream) {
  if (sm90_use_pingpong_config(args)) {
    PingpongGemm::run(args, stream);
  } else {
    LargeGemm::run(args, stream);
  }
}

}  // namespace fusedmoe::cuda
