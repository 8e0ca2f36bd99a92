// SM90 grouped GEMM for the fp8-block format (DeepSeek-V3 recipe): e4m3 x e4m3 operands with fp32
// 1 x 128 activation and 128 x 128 weight block scales applied inside the mainloop (the template
// and the scale layouts: sm90_blockwise_gemm.cuh). D is the dequantised fp32 result, and the
// next stages apply no further dequant.
//
// Three instances, as the other fp8 family: 128x128x128 (activations x weights^T) for many rows per
// expert, swap-AB 128x64x128 (weights on the 128-row side, tokens on N) for few, and swap-AB
// 256x64x128 for few with short K and n a multiple of 256. The large one also with a bf16 D:
// sm90_grouped_gemm_fp8_blockwise_d16.cu.
#include <algorithm>

#include "cuda/sm90_blockwise_gemm.cuh"

namespace fusedmoe::cuda {
namespace {
using namespace cute;
using sm90_blockwise::BlockwiseGemm;

using LargeGemm = BlockwiseGemm<Shape<_128, _128, _128>, /*SwapAB=*/false>;
using SmallGemm = BlockwiseGemm<Shape<_128, _64, _128>, /*SwapAB=*/true>;
// Swap-AB with short K (sm90_use_small_tall_config, as the fp8 family): 256 weight rows per tile,
// two 128-row weight scale blocks.
using SmallTallGemm = BlockwiseGemm<Shape<_256, _64, _128>, /*SwapAB=*/true>;
}  // namespace

bool sm90_fp8_blockwise_built() { return true; }

size_t sm90_grouped_gemm_fp8_blockwise_workspace(int groups, int sm_count) {
  return std::max({LargeGemm::workspace_bytes(groups, sm_count), SmallGemm::workspace_bytes(groups, sm_count),
                   SmallTallGemm::workspace_bytes(groups, sm_count)});
}

void sm90_grouped_gemm_fp8_blockwise(const GroupedGemmArgs& args, cudaStream_t stream) {
  // The 256-row weight tile reads the scales of two 128-row blocks: with n not a multiple of 256
  // its last tile read one past the expert's (the last expert's: past the array; memcheck on
  // relu2 layers with n = 128).
  if (sm90_use_small_tall_config(args) && args.n % 256 == 0) SmallTallGemm::run(args, stream);
  else if (sm90_use_small_config(args)) SmallGemm::run(args, stream);
  else LargeGemm::run(args, stream);
}

}  // namespace fusedmoe::cuda
