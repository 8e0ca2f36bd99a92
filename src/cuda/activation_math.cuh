#pragma once
// The activation stage's arithmetic, shared by every kernel that produces GEMM2's operand from
// GEMM1's sums (activation.cu's kernels, small_m_activation.cu): dequant and bias with each step
// rounded on its own (no contraction, so all of them give the same bits), the activation
// functions, and the rounding to the activation dtype. Steps and order are the CPU oracle's.
#include <cuda_runtime.h>

#include "cuda/device_utils.cuh"
#include "cuda/moe_kernels.hpp"

namespace fusedmoe::cuda {

// x / d for the sigmoid denominators d = 1 + e^-y, y <= 88 (d in [1, 1.7e38], finite): the fast
// path of nvcc's IEEE division (refined reciprocal, quotient, one fma correction) without its
// FCHK-guarded slow-path branch. It gives the IEEE quotient wherever that branch would not be
// taken; it is taken only for quotients near the underflow range (d > 2^126, i.e. y > 87: there
// this returns 0 where IEEE gives a value below 1.5e-36). Branch-free, so the compiler can
// interleave the activations of many outputs: the per-output branch serialised the fused GEMM1
// epilogue (sm90_gated_act_epilogue.cuh) on its latency chain.
__device__ __forceinline__ float div_sigmoid_den(float x, float d) {
  float r;
  asm("rcp.approx.f32 %0, %1;" : "=f"(r) : "f"(d));
  r = __fmaf_rn(r, __fmaf_rn(-d, r, 1.0f), r);
  const float q = __fmaf_rn(r, x, 0.0f);
  return __fmaf_rn(r, __fmaf_rn(-d, q, x), q);
}
// e^-y with y clamped at 88 from above (the denominator stays finite; see div_sigmoid_den).
__device__ __forceinline__ float sigmoid_den(float y) { return 1.0f + expf(fminf(-y, 88.0f)); }
__device__ __forceinline__ float silu(float x) { return div_sigmoid_den(x, sigmoid_den(x)); }
__device__ __forceinline__ float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
__device__ __forceinline__ float gelu_tanh(float x) {
  const float k = 0.79788456080286536f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

// The per-row dequant factor of GEMM1's output (TENSOR a * w[e], GENERIC the 4-bit product;
// CHANNEL is per column, in fix_h; 1 otherwise). a_tensor: tensor_scale_value of the a-scale.
__device__ __forceinline__ float row_factor(const ActivationParams& p, int64_t r, int64_t e, float a_tensor) {
  if (p.dq.kind == Dequant::TENSOR) return __fmul_rn(a_tensor, p.dq.w[e]);
  if (p.dq.kind == Dequant::GENERIC) return generic_factor(p.dq, r, e);
  return 1.0f;
}

// GEMM1 output element `col` of row r (expert e) dequantised and biased: v * ds (CHANNEL:
// v * (a_row[r] * w[e, col])) + bias[e, col].
__device__ __forceinline__ float fix_h(const ActivationParams& p, float v, float ds, int64_t r, int64_t e,
                                       int64_t col) {
  if (p.dq.kind == Dequant::CHANNEL) v = __fmul_rn(v, __fmul_rn(p.dq.a_row[r], p.dq.w[e * p.R + col]));
  else if (p.dq.kind != Dequant::NONE) v = __fmul_rn(v, ds);
  if (p.bias) v = __fadd_rn(v, p.bias[e * p.R + col]);
  return v;
}

// The gated activations (not RELU2) of a dequantised, biased gate / up pair, before rounding:
// gated_as<A> for a fixed activation (the fused GEMM1 epilogue instantiates each), gated() with
// the layer's.
template <Activation A>
__device__ __forceinline__ float gated_as(const ActivationParams& p, float g, float u) {
  if constexpr (A == Activation::SILU) return silu(g) * u;
  else if constexpr (A == Activation::GELU) return gelu_erf(g) * u;
  else if constexpr (A == Activation::GELU_TANH) return gelu_tanh(g) * u;
  else {  // SWIGLUOAI
    const float L = p.limit;
    g = g < L ? g : L;
    u = u < -L ? -L : (u > L ? L : u);
    return div_sigmoid_den((u + 1.0f) * g, sigmoid_den(p.alpha * g));
  }
}
__device__ __forceinline__ float gated(const ActivationParams& p, float g, float u) {
  switch (p.act) {
    case Activation::SILU: return gated_as<Activation::SILU>(p, g, u);
    case Activation::GELU: return gated_as<Activation::GELU>(p, g, u);
    case Activation::GELU_TANH: return gated_as<Activation::GELU_TANH>(p, g, u);
    default: return gated_as<Activation::SWIGLUOAI>(p, g, u);
  }
}

// The columns of the gate and the up value of activation output n (gated activations).
__device__ __forceinline__ void gate_up_columns(const ActivationParams& p, int64_t n, int64_t& gi, int64_t& ui) {
  const bool gate_first = p.order == GateUpOrder::GATE_UP;
  if (p.interleaved) {
    gi = 2 * n + (gate_first ? 0 : 1);
    ui = 2 * n + (gate_first ? 1 : 0);
  } else {
    gi = gate_first ? n : p.N + n;
    ui = gate_first ? p.N + n : n;
  }
}

// Activation output n of row r (expert e), rounded to the activation dtype, with the row's dequant factor ds
// (row_factor; the CHANNEL factor is per column, in fix_h).
__device__ __forceinline__ float act_value(const ActivationParams& p, int64_t r, int64_t e, float ds, int64_t n) {
  const float* h = p.h + r * p.R;  // the row's GEMM1 output
  float a;
  if (p.act == Activation::RELU2) {
    const float v = fix_h(p, h[n], ds, r, e, n);
    const float c = v > 0.0f ? v : 0.0f;
    a = c * c;
  } else {
    int64_t gi, ui;
    gate_up_columns(p, n, gi, ui);
    a = gated(p, fix_h(p, h[gi], ds, r, e, gi), fix_h(p, h[ui], ds, r, e, ui));
  }
  return round_to(p.act_dtype, a);
}
// The same with the row's factor derived here.
__device__ __forceinline__ float act_value(const ActivationParams& p, int64_t r, int64_t e, int64_t n) {
  const float a_tensor = p.dq.kind == Dequant::TENSOR ? tensor_scale_value(p.dq.a_tensor) : 1.0f;
  return act_value(p, r, e, row_factor(p, r, e, a_tensor), n);
}

}  // namespace fusedmoe::cuda
