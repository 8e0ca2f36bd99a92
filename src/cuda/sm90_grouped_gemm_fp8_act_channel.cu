// GEMM1 + activation for fp8-channel layers at large batches (per-token activation scales x
// per-channel weight scales): the fp8 large-M mainloop (Fp8LargeConfig, FP8FastAccum) with the
// gated activation in the epilogue, each output dequantised by a_row[r] x w[e, col] first (fix_h's
// factor), written rounded to bf16 (sm90_gated_act_epilogue.cuh). The per-row fp8 quantisation of
// GEMM2's input needs the row's amax, so it runs after, on those bf16 rows (launch_activation with
// ActivationParams::act_bf16): fp32 h ([rows, 2N]) is neither written nor read back.
#include "cuda/sm90_gated_act_epilogue.cuh"
#include "cuda/sm90_grouped_gemm_configs.cuh"

namespace fusedmoe::cuda {
namespace {
using ChannelActGemm = sm90::GroupedGemmAct<cutlass::float_e4m3_t, sm90::Fp8LargeConfig, /*kFp8Out=*/false,
                                            /*kChannel=*/true>;
}  // namespace

size_t sm90_grouped_gemm_fp8_act_channel_workspace(int groups, int sm_count) {
  return ChannelActGemm::workspace_bytes(groups, sm_count);
}

void sm90_grouped_gemm_fp8_act_channel(const GroupedGemmArgs& args, const ActivationParams& act, cudaStream_t stream) {
  ChannelActGemm::run(args, act, stream);
}

}  // namespace fusedmoe::cuda
