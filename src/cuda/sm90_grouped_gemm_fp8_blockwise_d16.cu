// The fp8-block large-M instance (sm90_grouped_gemm_fp8_blockwise.cu's 128x128x128) with a bf16 D:
// the layer's dequantised GEMM2 output y rounded to bf16 (sm90_bf16_d_applies in grouped_gemm.hpp).
// Its own file: each instance costs about a minute and several GB of compiler memory.
#include "cuda/sm90_blockwise_gemm.cuh"

namespace fusedmoe::cuda {
namespace {
using namespace cute;
using LargeGemm = sm90_blockwise::BlockwiseGemm<Shape<_128, _128, _128>, sm90_blockwise::kBlock,
                                                cutlass::bfloat16_t, sm90_blockwise::kClusterN>;
}  // namespace

size_t sm90_grouped_gemm_fp8_blockwise_d16_workspace(int groups, int sm_count) {
  return LargeGemm::workspace_bytes(groups, sm_count);
}

void sm90_grouped_gemm_fp8_blockwise_d16(const GroupedGemmArgs& args, cudaStream_t stream) {
  LargeGemm::run(args, stream);
}

}  // namespace fusedmoe::cuda
