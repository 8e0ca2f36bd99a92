// SM90 grouped GEMM for fp8-channel GEMM2 at large batches: the cooperative 128x256 FP8FastAccum
// config of the other fp8 instances, whose epilogue applies the expert's per-output-channel
// weight scale before y is rounded to bf16:
//   y[r, c] = bf16( acc[r, c] x w[e, c] )
// (GroupedGemm's kColScale; the row's activation scale stays a per-slot factor of the finalize).
// Without it the finalize applied w[e, c] per slot and column, reading the [E, hidden] scale table
// once per slot of every token - at DeepSeek-V3 TP8 with 4096 tokens 0.94 GB of L2 reads next to
// y's 0.47 GB (fp8-channel's finalize 271 us against fp8-tensor's 190 us, H100). The mainloop is
// the one of sm90_grouped_gemm_fp8_d16.cu. Its own file: each instance costs about a minute and
// several GB of compiler memory.
#include "cuda/sm90_grouped_gemm_configs.cuh"

namespace fusedmoe::cuda {
namespace {
using DequantGemm = sm90::GroupedGemm<cutlass::float_e4m3_t, sm90::Fp8LargeConfig, cutlass::bfloat16_t,
                                      /*kColScale=*/true>;
}  // namespace

size_t sm90_grouped_gemm_fp8_d16_dequant_workspace(int groups, int sm_count) {
  return DequantGemm::workspace_bytes(groups, sm_count);
}

void sm90_grouped_gemm_fp8_d16_dequant(const GroupedGemmArgs& args, cudaStream_t stream) {
  if (args.op != Operand::FP8)
    throw Error("CUTLASS grouped GEMM (fp8, channel scales in the epilogue): needs fp8 operands");
  DequantGemm::run(args, stream);
}

}  // namespace fusedmoe::cuda
