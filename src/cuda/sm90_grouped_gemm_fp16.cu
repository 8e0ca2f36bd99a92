// SM90 grouped GEMM instances for fp16 operands (format fp16). See sm90_grouped_gemm.cuh.
// One instance (about 100 s and 3 GB of compiler memory): a cooperative 128x256 tile. Few rows per
// expert (sm90_use_small_config) run on the stream GEMM (stream_gemm.cu) instead; its swap-AB
// 128x64 instance was removed on 2026-11-26.
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
using LargeGemm = sm90::GroupedGemm<cutlass::half_t, LargeConfig>;
}  // namespace

size_t sm90_grouped_gemm_fp16_workspace(int groups, int sm_count) {
  return LargeGemm::workspace_bytes(groups, sm_count);
}

void sm90_grouped_gemm_fp16(const GroupedGemmArgs& args, cudaStream_t stream) {
  LargeGemm::run(args, stream);
}

}  // namespace fusedmoe::cuda
