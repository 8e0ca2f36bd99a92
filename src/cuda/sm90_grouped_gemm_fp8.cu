// SM90 grouped GEMM instances for e4m3 x e4m3 operands (formats fp8-tensor and fp8-channel:
// their per-tensor / per-channel / per-token scales are applied by the next stage, so these
// instances serve both). See sm90_grouped_gemm.cuh.
// Instances: a cooperative 128x256 tile for many rows per expert, a pingpong 128x128 tile for many
// rows and short K (sm90_use_pingpong_config), and swap-AB tiles for few rows: 128x64, and
// 256x64 for short K (sm90_use_small_config / sm90_use_small_tall_config in grouped_gemm.hpp).
#include <algorithm>

#include "cuda/sm90_grouped_gemm_configs.cuh"

namespace fusedmoe::cuda {
namespace {
using namespace cute;
// The large-M configs (sm90_grouped_gemm_configs.cuh and the pingpong one below) use FP8FastAccum. The swap-AB small config
// (weight streaming) keeps the promoting default schedule: it is bound by the weight loads, not
// by the MMAs.
using SmallConfig = sm90::TileConfig<Shape<_128, _64, _128>, Shape<_1, _1, _1>,
                                     cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                                     cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
// Pingpong: each consumer warpgroup a whole 128x128 tile, epilogues overlapping the other's MMAs
// (large-M GEMMs with short K and an fp32 D, sm90_use_pingpong_config); FP8FastAccum as the
// large config.
using PingpongConfig = sm90::TileConfig<Shape<_128, _128, _128>, Shape<_1, _1, _1>,
                                        cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8FastAccum,
                                        cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong>;
using LargeGemm = sm90::GroupedGemm<cutlass::float_e4m3_t, sm90::Fp8LargeConfig, /*SwapAB=*/false>;
using PingpongGemm = sm90::GroupedGemm<cutlass::float_e4m3_t, PingpongConfig, /*SwapAB=*/false>;
// Swap-AB with short K (sm90_use_small_tall_config): 256 weight rows per tile, 128 per consumer
// warpgroup.
using SmallTallConfig = sm90::TileConfig<Shape<_256, _64, _128>, Shape<_1, _1, _1>,
                                         cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                                         cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
using SmallGemm = sm90::GroupedGemm<cutlass::float_e4m3_t, SmallConfig, /*SwapAB=*/true>;
using SmallTallGemm = sm90::GroupedGemm<cutlass::float_e4m3_t, SmallTallConfig, /*SwapAB=*/true>;
}  // namespace

size_t sm90_grouped_gemm_fp8_workspace(int groups, int sm_count) {
  return std::max({LargeGemm::workspace_bytes(groups, sm_count), SmallGemm::workspace_bytes(groups, sm_count),
                   PingpongGemm::workspace_bytes(groups, sm_count), SmallTallGemm::workspace_bytes(groups, sm_count)});
}

void sm90_grouped_gemm_fp8(const GroupedGemmArgs& args, cudaStream_t stream) {
  if (sm90_use_small_tall_config(args)) {
    SmallTallGemm::run(args, stream);
  } else if (sm90_use_small_config(args)) {
    SmallGemm::run(args, stream);
  } else if (sm90_use_pingpong_config(args)) {
    PingpongGemm::run(args, stream);
  } else {
    LargeGemm::run(args, stream);
  }
}

}  // namespace fusedmoe::cuda
