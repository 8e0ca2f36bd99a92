// Finalize stage: out[t] = sum over k = 0..topk-1 (in this order) of w_tk * (dequant(y_tk) + b2),
// in fp32, then cast to the output dtype. Slots whose expert is invalid or not local have no
// row and contribute nothing. Each output element is summed by one thread in a fixed order:
// deterministic, no atomics.
#include <cuda_runtime.h>

#include "cuda/cuda_check.hpp"
#include "cuda/device_utils.cuh"

namespace fusedmoe::cuda {
namespace {

constexpr int kMaxTopkInSmem = 64;

// One block per token (grid-stride over the tokens) and column chunk (blockIdx.y).
__global__ void finalize_kernel(FinalizeParams p) {
  __shared__ int32_t rows_s[kMaxTopkInSmem];
  __shared__ int32_t experts_s[kMaxTopkInSmem];
  __shared__ float weights_s[kMaxTopkInSmem];
  __shared__ float ascale_s[kMaxTopkInSmem];
  const int topk = static_cast<int>(p.topk);
  for (int64_t t = blockIdx.x; t < p.M; t += gridDim.x) {
    __syncthreads();  // the previous token's slot data is no longer read
    for (int k = threadIdx.x; k < topk; k += blockDim.x) {
      const int64_t i = t * p.topk + k;
      const int32_t r = p.slot_row[i];
      rows_s[k] = r;
      experts_s[k] = r >= 0 ? p.row_expert[r] : 0;
      weights_s[k] = p.on_input ? 1.0f : p.topk_weights[i];
      float a = 1.0f;
      if (r >= 0 && p.dq.kind == Dequant::TENSOR) a = tensor_scale_value(p.dq.a_tensor);
      if (r >= 0 && p.dq.kind == Dequant::CHANNEL) a = p.dq.a_row[r];
      ascale_s[k] = a;
    }
    __syncthreads();
    const ColRange cr = block_columns(p.K);
    for (int64_t c = cr.begin + threadIdx.x; c < cr.end; c += blockDim.x) {
      float acc = 0.0f;
      for (int k = 0; k < topk; ++k) {
        const int32_t r = rows_s[k];
        if (r < 0) continue;
        const int64_t e = experts_s[k];
        float y = p.y[static_cast<int64_t>(r) * p.K + c];
        if (p.dq.kind == Dequant::TENSOR) y *= ascale_s[k] * p.dq.w[e];
        if (p.dq.kind == Dequant::CHANNEL) y *= ascale_s[k] * p.dq.w[e * p.K + c];
        if (p.bias) y += p.bias[e * p.K + c];
        acc += weights_s[k] * y;
      }
      store_from_float(p.out, p.out_dtype, t * p.K + c, acc);
    }
  }
}

}  // namespace

bool finalize_supports_topk(int64_t topk) { return topk <= kMaxTopkInSmem; }

void launch_finalize(const FinalizeParams& p, cudaStream_t stream) {
  const int threads = p.K >= 2048 ? 256 : 128;
  const int64_t blocks = p.M < 65535 ? p.M : 65535;
  const dim3 grid(static_cast<unsigned>(blocks), column_blocks(p.K));
  finalize_kernel<<<grid, threads, 0, stream>>>(p);
  FUSEDMOE_CUDA_CHECK_LAUNCH();
}

}  // namespace fusedmoe::cuda
