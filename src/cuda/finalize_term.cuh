#pragma once
// One slot's term of a token's top-k sum, shared by every kernel that sums a token's slots
// (finalize.cu, small_m_finalize.cu): acc + w * (dequant(y) + b), each step rounded on its own
// (no contraction of the multiply-adds), so all of them give the same bits for the same y.
#include <cuda_runtime.h>

#include "cuda/device_utils.cuh"
#include "cuda/moe_kernels.hpp"

namespace fusedmoe::cuda {

// The per-slot dequant factor of row r (expert e): TENSOR a * w[e], CHANNEL a_row[r] (times
// w[e, c] per column in add_slot), GENERIC the 4-bit formats' product; 1 otherwise.
__device__ __forceinline__ float slot_factor(const FinalizeParams& p, int32_t r, int32_t e, float a_tensor) {
  if (r < 0) return 1.0f;
  switch (p.dq.kind) {
    case Dequant::TENSOR: return __fmul_rn(a_tensor, p.dq.w[e]);
    case Dequant::CHANNEL: return p.dq.a_row[r];
    case Dequant::GENERIC: return generic_factor(p.dq, r, e);
    default: return 1.0f;
  }
}

// The slots of one token, read once into shared memory by a block that sums them: row (-1: the
// slot has none), expert, router weight (1 with the weight on the input), slot_factor.
constexpr int kMaxTokenSlots = 64;  // finalize_supports_topk
struct TokenSlots {
  int32_t row[kMaxTokenSlots];
  int32_t expert[kMaxTokenSlots];
  float weight[kMaxTokenSlots];
  float factor[kMaxTokenSlots];
  // The whole block calls it; the caller synchronises before reading.
  __device__ void load(const FinalizeParams& p, int64_t t, float a_tensor) {
    for (int k = threadIdx.x; k < p.topk; k += blockDim.x) {
      const int64_t i = t * p.topk + k;
      const int32_t r = p.slot_row[i];
      const int32_t e = r >= 0 ? p.row_expert[r] : 0;
      row[k] = r;
      expert[k] = e;
      weight[k] = p.on_input ? 1.0f : p.topk_weights[i];
      factor[k] = slot_factor(p, r, e, a_tensor);
    }
  }
};

// acc + w * (y * factor [* w_channel]  + bias), with w_channel = w[e, c] (CHANNEL only) and
// bias = bias[e, c] (when there is one) given by the caller, which may load them as vectors.
// Its term before the weight: dequant(y) + b.
__device__ __forceinline__ float slot_term(const FinalizeParams& p, float y, float f, float w_channel, float bias) {
  if (p.dq.kind == Dequant::TENSOR || p.dq.kind == Dequant::GENERIC) y = __fmul_rn(y, f);
  if (p.dq.kind == Dequant::CHANNEL) y = __fmul_rn(y, __fmul_rn(f, w_channel));
  if (p.bias) y = __fadd_rn(y, bias);
  return y;
}
__device__ __forceinline__ float add_slot_loaded(const FinalizeParams& p, float acc, float y, float w, float f,
                                                 float w_channel, float bias) {
  return __fmaf_rn(w, slot_term(p, y, f, w_channel, bias), acc);
}

// acc + w * (y * factor [* w_channel[e, c]] + bias[e, c]).
__device__ __forceinline__ float add_slot(const FinalizeParams& p, float acc, float y, float w, float f, int64_t e,
                                          int64_t c) {
  const float wc = p.dq.kind == Dequant::CHANNEL ? p.dq.w[e * p.K + c] : 1.0f;
  const float b = p.bias ? p.bias[e * p.K + c] : 0.0f;
  return add_slot_loaded(p, acc, y, w, f, wc, b);
}

}  // namespace fusedmoe::cuda
