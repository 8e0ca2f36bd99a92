// SM90 grouped GEMM with e4m3 operands and weight scales per row and 128-wide K group
// (sm90_blockwise_gemm.cuh with WeightGran = 1):
//   D[m, n] = sum over kb of dot(a[m, kb], w[n, kb]) * a_scale[m, kb] * w_scale[n, kb]
// The large-batch way of W4A8 (w4_gemm.hpp): int4 weights are exact e4m3 codes, so decoding
// them costs one byte per weight instead of two, the GEMM runs on the fp8 tensor cores, and the
// bf16 group scales are applied in fp32 to each 128-wide partial sum, which is the oracle's
// arithmetic (exact products, fp32 sums) without the fp16 range limit of scaling the weights.
// One instance, 128x128x128 (activations x weights^T): this way only runs at >= 48 rows per
// expert (kW4DequantMinRowsPerExpert).
#include "cuda/sm90_blockwise_gemm.cuh"

namespace fusedmoe::cuda {
namespace {
using namespace cute;
using GroupwiseGemm = sm90_blockwise::BlockwiseGemm<Shape<_128, _128, _128>, /*SwapAB=*/false, /*WeightGran=*/1>;
}  // namespace

bool sm90_fp8_groupwise_built() { return true; }

size_t sm90_grouped_gemm_fp8_groupwise_workspace(int groups, int sm_count) {
  return GroupwiseGemm::workspace_bytes(groups, sm_count);
}

void sm90_grouped_gemm_fp8_groupwise(const GroupedGemmArgs& args, cudaStream_t stream) {
  GroupwiseGemm::run(args, stream);
}

}  // namespace fusedmoe::cuda
