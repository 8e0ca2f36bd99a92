#pragma once
// The cooperative large-M tile configurations shared by the fp32-D instances
// (sm90_grouped_gemm_bf16.cu, sm90_grouped_gemm_fp8.cu) and the bf16-D ones
// (sm90_grouped_gemm_<family>_d16.cu), so both kinds of a family run the same tiles and schedule.
// (The pingpong configs serve an fp32 D only and stay in their family's file.)
#include "cuda/sm90_grouped_gemm.cuh"

namespace fusedmoe::cuda::sm90 {

// Cooperative: two consumer warpgroups split the 128-row tile. 256 columns, not 128: each
// activation tile load then feeds twice the MMAs (bf16 and fp8 layers 4-16% faster where this
// config runs, M >= 1024 on an H200: src/cuda/NOTES.md; 128 fp32 accumulators per consumer
// thread). K tiles of 64 bf16 / 128 fp8 values are one 128-byte swizzle row.
using Bf16LargeConfig = TileConfig<cute::Shape<cute::_128, cute::_256, cute::_64>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                                   cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                                   cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
// The fp8 large-M config uses FP8FastAccum: wgmma accumulates a whole K tile chain without
// promoting the partial sums into separate fp32 registers every few k-blocks (measured accuracy
// in NOTES.md).
using Fp8LargeConfig = TileConfig<cute::Shape<cute::_128, cute::_256, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                                  cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8FastAccum,
                                  cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;

}  // namespace fusedmoe::cuda::sm90
