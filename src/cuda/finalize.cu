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
      if (r >= 0 && p.dq.kind == Dequant::GENERIC) a = generic_factor(p.dq, r, p.row_expert[r]);
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
        float y = load_as_float(p.y, p.y_dtype, static_cast<int64_t>(r) * p.K + c);
        if (p.dq.kind == Dequant::TENSOR) y *= ascale_s[k] * p.dq.w[e];
        if (p.dq.kind == Dequant::CHANNEL) y *= ascale_s[k] * p.dq.w[e * p.K + c];
        if (p.dq.kind == Dequant::GENERIC) y *= ascale_s[k];
        if (p.bias) y += p.bias[e * p.K + c];
        acc += weights_s[k] * y;
      }
      store_from_float(p.out, p.out_dtype, t * p.K + c, acc);
    }
  }
}

// Vector path: one thread per (token, 4 columns), grid-stride. The slots of a token are taken
// 8 at a time: their rows, then all their y loads (16 bytes each), then the sum in slot order,
// so a thread has up to 8 loads in flight instead of one (the scalar kernel above is bound by
// the latency of its one-at-a-time loads). Same operations in the same order as finalize_kernel.
constexpr int kSlotBatch = 8;
__global__ void __launch_bounds__(kVecThreads) finalize_vec_kernel(FinalizeParams p) {
  const int64_t vecs = p.K / 4;
  const int64_t items = p.M * vecs;
  const int topk = static_cast<int>(p.topk);
  const float a_tensor = p.dq.kind == Dequant::TENSOR ? tensor_scale_value(p.dq.a_tensor) : 1.0f;
  for (int64_t it = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; it < items;
       it += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = it / vecs, c = (it - t * vecs) * 4;
    const int64_t i0 = t * p.topk;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k0 = 0; k0 < topk; k0 += kSlotBatch) {
      int32_t r[kSlotBatch];
      float y[kSlotBatch][4];
#pragma unroll
      for (int j = 0; j < kSlotBatch; ++j) r[j] = k0 + j < topk ? __ldg(p.slot_row + i0 + k0 + j) : -1;
#pragma unroll
      for (int j = 0; j < kSlotBatch; ++j)
        if (r[j] >= 0) load4_as_float(p.y, p.y_dtype, static_cast<int64_t>(r[j]) * p.K + c, y[j]);
#pragma unroll
      for (int j = 0; j < kSlotBatch; ++j) {
        if (r[j] < 0) continue;
        const int64_t e = __ldg(p.row_expert + r[j]);
        const float w = p.on_input ? 1.0f : __ldg(p.topk_weights + i0 + k0 + j);
        float a = 1.0f;
        if (p.dq.kind == Dequant::TENSOR) a = a_tensor;
        if (p.dq.kind == Dequant::CHANNEL) a = __ldg(p.dq.a_row + r[j]);
        if (p.dq.kind == Dequant::GENERIC) a = generic_factor(p.dq, r[j], e);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          float yv = y[j][q];
          if (p.dq.kind == Dequant::TENSOR) yv *= a * p.dq.w[e];
          if (p.dq.kind == Dequant::CHANNEL) yv *= a * p.dq.w[e * p.K + c + q];
          if (p.dq.kind == Dequant::GENERIC) yv *= a;
          if (p.bias) yv += p.bias[e * p.K + c + q];
          acc[q] += w * yv;
        }
      }
    }
    store4_from_float(p.out, p.out_dtype, t * p.K + c, acc);
  }
}

}  // namespace

bool finalize_supports_topk(int64_t topk) { return topk <= kMaxTopkInSmem; }

void launch_finalize(const FinalizeParams& p, cudaStream_t stream) {
  const size_t out_bytes = p.out_dtype == DType::F32 ? 4 : 2;
  if (p.K % 4 == 0 && aligned_to(p.y, 16) && aligned_to(p.out, 4 * out_bytes)) {
    finalize_vec_kernel<<<vec_grid(p.M * (p.K / 4)), kVecThreads, 0, stream>>>(p);
    FUSEDMOE_CUDA_CHECK_LAUNCH();
    return;
  }
  const int threads = p.K >= 2048 ? 256 : 128;
  const int64_t blocks = p.M < 65535 ? p.M : 65535;
  const dim3 grid(static_cast<unsigned>(blocks), column_blocks(p.K));
  finalize_kernel<<<grid, threads, 0, stream>>>(p);
  FUSEDMOE_CUDA_CHECK_LAUNCH();
}

}  // namespace fusedmoe::cuda
