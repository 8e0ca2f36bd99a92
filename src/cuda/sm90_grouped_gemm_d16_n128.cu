// SM90 grouped GEMM instances with a bf16 D on 128x128 tiles (bf16 and fp8 operands): an experiment
// (FUSEDMOE_GEMM2_N128=1, grouped_gemm.cpp). GEMM2 with long K and few weight columns makes few tiles
// (Mixtral-8x7B at 1024 tokens: 8 experts x ~2.5 M tiles x 16 column tiles of 256 = ~320 tiles of 224
// k steps on 132 SMs, 2.4 rounds of the persistent grid: the third runs 42% full); half-width tiles
// halve the quantisation of the last round.
#include <algorithm>

#include "cuda/sm90_grouped_gemm_configs.cuh"

namespace fusedmoe::cuda {
namespace {
using Bf16Config = sm90::TileConfig<cute::Shape<cute::_128, cute::_128, cute::_64>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
using Fp8Config = sm90::TileConfig<cute::Shape<cute::_128, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                                   cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8FastAccum,
                                   cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
using Bf16Gemm = sm90::GroupedGemm<cutlass::bfloat16_t, Bf16Config, cutlass::bfloat16_t>;
using Fp8Gemm = sm90::GroupedGemm<cutlass::float_e4m3_t, Fp8Config, cutlass::bfloat16_t>;
}  // namespace

size_t sm90_grouped_gemm_d16_n128_workspace(int groups, int sm_count) {
  return std::max(Bf16Gemm::workspace_bytes(groups, sm_count), Fp8Gemm::workspace_bytes(groups, sm_count));
}

void sm90_grouped_gemm_d16_n128(const GroupedGemmArgs& args, cudaStream_t stream) {
  if (args.op == Operand::BF16) Bf16Gemm::run(args, stream);
  else Fp8Gemm::run(args, stream);
}

}  // namespace fusedmoe::cuda
