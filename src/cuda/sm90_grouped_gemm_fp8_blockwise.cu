// SM90 grouped GEMM for the fp8-block format (DeepSeek-V3 recipe): e4m3 x e4m3 operands with fp32
// 1 x 128 activation and 128 x 128 weight block scales applied inside the mainloop (the template
// and the scale layouts: sm90_blockwise_gemm.cuh). D is the dequantised fp32 result, and the
// next stages apply no further dequant.
//
// One instance here: 128x128x128 (activations x weights^T); also with a bf16 D in
// sm90_grouped_gemm_fp8_blockwise_d16.cu. Few rows per expert (sm90_use_small_config) run on the
// stream GEMM (stream_gemm.cu, block scales promoted per k block) instead; the swap-AB 128x64 and
// 256x64 instances were removed on 2026-11-26.
#include <algorithm>

#include "cuda/sm90_blockwise_gemm.cuh"

namespace fusedmoe::cuda {
namespace {
using namespace cute;
using sm90_blockwise::BlockwiseGemm;

using LargeGemm = BlockwiseGemm<Shape<_128, _128, _128>, sm90_blockwise::kBlock, float,
                                 sm90_blockwise::kClusterN>;
}  // namespace

bool sm90_fp8_blockwise_built() { return true; }

size_t sm90_grouped_gemm_fp8_blockwise_workspace(int groups, int sm_count) {
  return LargeGemm::workspace_bytes(groups, sm_count);
}

void sm90_grouped_gemm_fp8_blockwise(const GroupedGemmArgs& args, cudaStream_t stream) {
  LargeGemm::run(args, stream);
}

}  // namespace fusedmoe::cuda
