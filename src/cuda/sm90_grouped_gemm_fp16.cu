// SM90 grouped GEMM instances for fp16 operands (format fp16). See sm90_grouped_gemm.cuh.
// Two instances (each about 100 s and 3 GB of compiler memory): a 128x128 tile for many rows
// per expert, and a swap-AB 128x64 tile for few (sm90_use_small_config in grouped_gemm.hpp).
#include <algorithm>

#include "cuda/sm90_grouped_gemm.cuh"

namespace fusedmoe::cuda {
namespace {
using namespace cute;

// Cooperative: two consumer warpgroups split the 128-row tile. 256 columns, not 128: same-run A/B
// on an H200 (bench/results/2026-11-21-h200-74b7514-tests-fp16-tile-ab), layer 9-16% faster where
// this config runs (Mixtral M=1024 1827 -> 1531 us; M=4096 everywhere, e.g. DeepSeek-V3 TP1
// 9095 -> 7819 us). 64-deep K tiles of fp16 are one 128-byte swizzle row.
using LargeConfig = sm90::TileConfig<Shape<_128, _256, _64>, Shape<_1, _1, _1>,
                                     cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                                     cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
using SmallConfig = sm90::TileConfig<Shape<_128, _64, _64>, Shape<_1, _1, _1>,
                                     cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                                     cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
using LargeGemm = sm90::GroupedGemm<cutlass::half_t, LargeConfig, /*SwapAB=*/false>;
using SmallGemm = sm90::GroupedGemm<cutlass::half_t, SmallConfig, /*SwapAB=*/true>;
}  // namespace

size_t sm90_grouped_gemm_fp16_workspace(int groups, int sm_count) {
  return std::max(LargeGemm::workspace_bytes(groups, sm_count), SmallGemm::workspace_bytes(groups, sm_count));
}

void sm90_grouped_gemm_fp16(const GroupedGemmArgs& args, cudaStream_t stream) {
  if (sm90_use_small_config(args)) SmallGemm::run(args, stream);
  else LargeGemm::run(args, stream);
}

}  // namespace fusedmoe::cuda
