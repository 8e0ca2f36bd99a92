// SM90 grouped GEMM instances for bf16 operands (format bf16). See sm90_grouped_gemm.cuh.
// Instances: a cooperative 128x256 tile for many rows per expert, a pingpong 128x128 tile for many
// rows and short K (sm90_use_pingpong_config), and a swap-AB 128x64 tile for few rows
// (sm90_use_small_config in grouped_gemm.hpp).
#include <algorithm>

#include "cuda/sm90_grouped_gemm_configs.cuh"

namespace fusedmoe::cuda {
namespace {
using namespace cute;

using SmallConfig = sm90::TileConfig<Shape<_128, _64, _64>, Shape<_1, _1, _1>,
                                     cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                                     cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
// Pingpong: each consumer warpgroup a whole 128x128 tile, epilogues overlapping the other's MMAs
// (large-M GEMMs with short K and an fp32 D, sm90_use_pingpong_config).
using PingpongConfig = sm90::TileConfig<Shape<_128, _128, _64>, Shape<_1, _1, _1>,
                                        cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                                        cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong>;
using LargeGemm = sm90::GroupedGemm<cutlass::bfloat16_t, sm90::Bf16LargeConfig, /*SwapAB=*/false>;
using PingpongGemm = sm90::GroupedGemm<cutlass::bfloat16_t, PingpongConfig, /*SwapAB=*/false>;
using SmallGemm = sm90::GroupedGemm<cutlass::bfloat16_t, SmallConfig, /*SwapAB=*/true>;
}  // namespace

size_t sm90_grouped_gemm_bf16_workspace(int groups, int sm_count) {
  return std::max({LargeGemm::workspace_bytes(groups, sm_count), SmallGemm::workspace_bytes(groups, sm_count),
                   PingpongGemm::workspace_bytes(groups, sm_count)});
}

void sm90_grouped_gemm_bf16(const GroupedGemmArgs& args, cudaStream_t stream) {
  if (sm90_use_small_config(args)) {
    SmallGemm::run(args, stream);
  } else if (sm90_use_pingpong_config(args)) {
    PingpongGemm::run(args, stream);
  } else {
    LargeGemm::run(args, stream);
  }
}

}  // namespace fusedmoe::cuda
