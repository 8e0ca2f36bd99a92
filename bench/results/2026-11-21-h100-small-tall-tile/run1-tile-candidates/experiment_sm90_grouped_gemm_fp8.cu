// SM90 grouped GEMM instances for e4m3 x e4m3 operands (formats fp8-tensor and fp8-channel:
// their per-tensor / per-channel / per-token scales are applied by the next stage, so these
// instances serve both). See sm90_grouped_gemm.cuh.
// Instances: a cooperative 128x256 tile for many rows per expert, a pingpong 128x128 tile for many
// rows and short K (sm90_use_pingpong_config), and a swap-AB 128x64 tile for few rows
// (sm90_use_small_config in grouped_gemm.hpp).
#include <algorithm>
#include <cstdlib>
#include <string>

#include "cuda/sm90_grouped_gemm.cuh"

namespace fusedmoe::cuda {
namespace {
using namespace cute;
// The 128x128 (large-M, compute-bound) configs use FP8FastAccum: wgmma accumulates a whole K tile
// chain without promoting the partial sums into separate fp32 registers every few k-blocks
// (measured accuracy in NOTES.md). The swap-AB small config (weight streaming) keeps the
// promoting default schedule: it is bound by the weight loads, not by the MMAs.
// Cooperative: two consumer warpgroups split the 128-row tile. 256 columns, not 128: each
// activation tile load then feeds twice the MMAs (bf16 and fp8 layers 4-16% faster where this
// config runs, M >= 1024 on an H200: src/cuda/NOTES.md; 128 fp32 accumulators per consumer
// thread). 128-deep K tiles of fp8 are
// one 128-byte swizzle row.
using LargeConfig = sm90::TileConfig<Shape<_128, _256, _128>, Shape<_1, _1, _1>,
                                     cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8FastAccum,
                                     cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
// Pingpong: each consumer warpgroup a whole 128x128 tile, epilogues overlapping the other's MMAs
// (large-M GEMMs with short K, sm90_use_pingpong_config).
using PingpongConfig = sm90::TileConfig<Shape<_128, _128, _128>, Shape<_1, _1, _1>,
                                        cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8FastAccum,
                                        cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong>;
using SmallConfig = sm90::TileConfig<Shape<_128, _64, _128>, Shape<_1, _1, _1>,
                                     cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                                     cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
using LargeGemm = sm90::GroupedGemm<cutlass::float_e4m3_t, LargeConfig, /*SwapAB=*/false>;
using PingpongGemm = sm90::GroupedGemm<cutlass::float_e4m3_t, PingpongConfig, /*SwapAB=*/false>;
using SmallGemm = sm90::GroupedGemm<cutlass::float_e4m3_t, SmallConfig, /*SwapAB=*/true>;
// EXPERIMENT (FMOE_EXP_SMALL=n32 / m256): narrower token tile, or taller weight tile.
using SmallN32Config = sm90::TileConfig<Shape<_128, _32, _128>, Shape<_1, _1, _1>,
                                        cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                                        cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
using SmallM256Config = sm90::TileConfig<Shape<_256, _64, _128>, Shape<_1, _1, _1>,
                                         cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                                         cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
using SmallN32Gemm = sm90::GroupedGemm<cutlass::float_e4m3_t, SmallN32Config, /*SwapAB=*/true>;
using SmallM256Gemm = sm90::GroupedGemm<cutlass::float_e4m3_t, SmallM256Config, /*SwapAB=*/true>;
int exp_small() {
  static const int v = [] {
    const char* e = std::getenv("FMOE_EXP_SMALL");
    if (!e) return 0;
    return std::string(e) == "n32" ? 1 : std::string(e) == "m256" ? 2 : 0;
  }();
  return v;
}
}  // namespace

size_t sm90_grouped_gemm_fp8_workspace(int groups, int sm_count) {
  return std::max({LargeGemm::workspace_bytes(groups, sm_count), SmallGemm::workspace_bytes(groups, sm_count),
                   PingpongGemm::workspace_bytes(groups, sm_count), SmallN32Gemm::workspace_bytes(groups, sm_count),
                   SmallM256Gemm::workspace_bytes(groups, sm_count)});
}

void sm90_grouped_gemm_fp8(const GroupedGemmArgs& args, cudaStream_t stream) {
  if (sm90_use_small_config(args) && args.k <= 1024 && exp_small() == 1) {
    SmallN32Gemm::run(args, stream);
  } else if (sm90_use_small_config(args) && args.k <= 1024 && exp_small() == 2) {
    SmallM256Gemm::run(args, stream);
  } else if (sm90_use_small_config(args)) {
    SmallGemm::run(args, stream);
  } else if (sm90_use_pingpong_config(args)) {
    PingpongGemm::run(args, stream);
  } else {
    LargeGemm::run(args, stream);
  }
}

}  // namespace fusedmoe::cuda
