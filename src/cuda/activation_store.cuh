#pragma once
// The store of one gated activation output from GEMM1's gate and up sums, shared by the kernels
// that fuse the activation into GEMM1 (small_m_activation.cu, stream_gemm.cu): dequantised,
// biased, activated and rounded as the activation kernel does (activation_math.cuh), then
// converted (bf16 / fp16) or quantised with the static per-tensor fp8 scale into GEMM2's operand.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/activation_math.cuh"
#include "cuda/device_utils.cuh"
#include "cuda/moe_kernels.hpp"

namespace fusedmoe::cuda {

// For dequant NONE / TENSOR (the fused kernels' cases: a factor per expert, read once by make()
// after chain_wait()): the same steps and bits as fix_h + gated + round_to, then the store.
// CHANNEL (the stream GEMM1 + activation of fp8-channel): store_channel() with the column's
// weight scales, which the caller reads once per output.
struct ActivationRowStore {
  float ds = 1.0f, s = 1.0f;
  bool scaled = false, fp8 = false;
  __device__ static ActivationRowStore make(const ActivationParams& p, int e) {
    ActivationRowStore a;
    if (p.dq.kind == Dequant::TENSOR) a.ds = __fmul_rn(tensor_scale_value(p.dq.a_tensor), p.dq.w[e]);
    if (p.quant == Fp8Quant::TENSOR_STATIC) a.s = tensor_scale_value(p.scale);
    a.scaled = p.dq.kind == Dequant::TENSOR;
    a.fp8 = p.quant == Fp8Quant::TENSOR_STATIC;
    return a;
  }
  // The value store() converts or quantises: dequantised, biased, activated, rounded to the
  // activation dtype (also the fp32 staging value of the one-token kernel's dynamic modes).
  __device__ __forceinline__ float value(const ActivationParams& p, float gate, float up, float bias_gate,
                                         float bias_up) const {
    if (scaled) gate = __fmul_rn(gate, ds), up = __fmul_rn(up, ds);
    if (p.bias) gate = __fadd_rn(gate, bias_gate), up = __fadd_rn(up, bias_up);
    return round_to(p.act_dtype, gated(p, gate, up));
  }
  __device__ __forceinline__ void store(const ActivationParams& p, int64_t r, int64_t n, float gate, float up,
                                        float bias_gate, float bias_up) const {
    const float v = value(p, gate, up, bias_gate, bias_up);
    if (fp8) static_cast<uint8_t*>(p.out)[r * p.N + n] = quant_tensor(v, s);
    else store_from_float(p.out, p.op == Operand::BF16 ? DType::BF16 : DType::F16, r * p.N + n, v);
  }
  // Dequant CHANNEL: the sums times (the row's activation scale x the column's weight scale, wg for
  // the gate column, wu for the up column) first, as fix_h.
  __device__ __forceinline__ void store_channel(const ActivationParams& p, int64_t r, int64_t n, float gate, float up,
                                                float bias_gate, float bias_up, float wg, float wu) const {
    const float a = p.dq.a_row[r];
    store(p, r, n, __fmul_rn(gate, __fmul_rn(a, wg)), __fmul_rn(up, __fmul_rn(a, wu)), bias_gate, bias_up);
  }
  // The same with the bias of GEMM1 columns gi (gate) and ui (up) of expert e read here.
  __device__ __forceinline__ void store_cols(const ActivationParams& p, int64_t r, int e, int64_t n, int64_t gi,
                                             int64_t ui, float gate, float up) const {
    const float bg = p.bias ? p.bias[static_cast<int64_t>(e) * p.R + gi] : 0.0f;
    const float bu = p.bias ? p.bias[static_cast<int64_t>(e) * p.R + ui] : 0.0f;
    store(p, r, n, gate, up, bg, bu);
  }
};

}  // namespace fusedmoe::cuda
