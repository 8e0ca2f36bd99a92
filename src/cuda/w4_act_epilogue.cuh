#pragma once
// GEMM1 + gated activation in the epilogue of the 4-bit swap-AB wgmma kernel (w4_wgmma.cu, MXFP4 /
// NVFP4), which tiles weight rows on the wgmma M side (128 per CTA, 16 per warp) and tokens on N:
// a thread's D fragment rows g and g + 8 are weight rows of the warp's 16. (The same epilogue on
// W4A8's kernel, w4a8_wgmma.cu, was measured 1.00-1.05x slower and not kept:
// bench/results/2026-11-26-h200-w4a8-gemm1-act-rejected.) With the rows mapped by act_weight_row - local row 16 b + i is output 8 b + i % 8's
// gate row (i < 8) or up row (i >= 8), 64 outputs per CTA - those two rows are one output's gate
// and up sums, and the activation runs in registers (act_epilogue).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/activation_math.cuh"
#include "cuda/moe_kernels.hpp"

namespace fusedmoe::cuda {

constexpr int kW4ActOutputsPerCta = 64;

// The weight row of local row lr (0 .. 127) of the CTA whose first output is o0; ok: the output
// exists (else 0, never stored).
__device__ __forceinline__ int64_t act_weight_row(const ActivationParams& a, int64_t o0, int lr, bool& ok) {
  const int64_t o = o0 + (lr >> 4) * 8 + (lr & 7);
  ok = o < a.N;
  if (!ok) return 0;
  int64_t gi, ui;
  gate_up_columns(a, o, gi, ui);
  return (lr & 8) ? ui : gi;
}

// The epilogue for N tokens of one output o (acc: the gate sums in acc[4 j + q], the up sums in
// acc[4 j + 2 + q], q < 2, for token tok0 + 8 j + 2 t + q of the tile; each times `scale` is GEMM1's
// h as the unfused kernels store it): the activation kernel's arithmetic on those values (fix_h's
// GENERIC dequant and bias, gated_as<A>, rounded to bf16), stored to out [rows, N] (GEMM2's bf16
// operand, or the bf16 rows of a quantise pass). Branch-free up to the predicated stores, so that
// nvcc interleaves the outputs' latency chains: rolled over the outputs (one chain at a time, one
// CTA per SM) the fused GEMM1 took 635 us against 497 for the plain one and 90 for the activation
// kernel (Qwen3-30B-A3B mxfp4, 4096 tokens, H200; bench/results/2026-11-26-h200-w4-gemm1-act r1).
// The bits equal fix_h's: the factor is generic_factor's product with absent factors as x 1
// (exact), the add of an absent bias adds -0 (x + -0 == x, signed zeros included).
// kStage: the values go to a shared-memory tile instead, token tok0 + .. at row (tok0 + ..) and
// column oc (the caller's local column) of `out` with a row pitch of kW4ActStagePitch, tokens
// past `rows` included (the caller copies only the tile's rows out).
constexpr int kW4ActStagePitch = 64 + 8;  // bf16: 144-byte rows, so a quad's 4 tokens start 8 banks apart
template <int N, Activation A, bool kStage, int kAcc>
__device__ __forceinline__ void act_epilogue_as(const ActivationParams& a, __nv_bfloat16* out, const float (&acc)[kAcc],
                                                float scale, int e, int64_t row0, int rows, int64_t o, int tok0,
                                                int64_t oc) {
  static_assert(N / 2 <= kAcc, "the sums of N tokens");
  if (o >= a.N) return;
  int64_t gi, ui;
  gate_up_columns(a, o, gi, ui);
  const float bg = a.bias ? a.bias[static_cast<int64_t>(e) * a.R + gi] : -0.0f;
  const float bu = a.bias ? a.bias[static_cast<int64_t>(e) * a.R + ui] : -0.0f;
  const float ae = a.dq.a_expert ? a.dq.a_expert[e] : 1.0f, we = a.dq.w_expert ? a.dq.w_expert[e] : 1.0f;
  const float* a_row = a.dq.a_row;
  const int t = threadIdx.x & 3;
  // The rows' activation scales first (1 without them: (1 x ae) x we is generic_factor's product),
  // all loads in flight before the arithmetic. With each load inside the arithmetic (behind an
  // a_row test) the per-token fp8 instance's GEMM1 took 655 us against 557 for the bf16 one
  // (Qwen3-30B-A3B 4096 tokens, H200, r2); loads first, in the build that also fixed
  // w4_wgmma.cu's decode multipliers: 543 (r3).
  float ar[N / 4];
#pragma unroll
  for (int i = 0; i < N / 4; ++i) {
    const int tok = tok0 + 8 * (i / 2) + 2 * t + (i % 2);
    ar[i] = a_row && tok < rows ? a_row[row0 + tok] : 1.0f;
  }
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int tok = tok0 + 8 * j + 2 * t + q;
      const bool ok = tok < rows;
      const int64_t r = row0 + tok;
      const float ds = __fmul_rn(__fmul_rn(ar[2 * j + q], ae), we);
      const float gate = __fadd_rn(__fmul_rn(acc[4 * j + q] * scale, ds), bg);
      const float up = __fadd_rn(__fmul_rn(acc[4 * j + 2 + q] * scale, ds), bu);
      const __nv_bfloat16 v = __float2bfloat16_rn(gated_as<A>(a, gate, up));
      if constexpr (kStage) out[tok * kW4ActStagePitch + oc] = v;
      else if (ok) out[r * a.N + oc] = v;
    }
}

// act_epilogue_as for the layer's activation (gated only; the host refuses RELU2). oc: the column
// output o is stored at (o, or its place in the 4-bit wgmma kernel's k order: w4_kperm.cuh).
template <int N, bool kStage = false, int kAcc>
__device__ __forceinline__ void act_epilogue(const ActivationParams& a, __nv_bfloat16* out, const float (&acc)[kAcc],
                                             float scale, int e, int64_t row0, int rows, int64_t o, int tok0,
                                             int64_t oc) {
  switch (a.act) {
    case Activation::SILU:
      act_epilogue_as<N, Activation::SILU, kStage>(a, out, acc, scale, e, row0, rows, o, tok0, oc);
      break;
    case Activation::GELU:
      act_epilogue_as<N, Activation::GELU, kStage>(a, out, acc, scale, e, row0, rows, o, tok0, oc);
      break;
    case Activation::GELU_TANH:
      act_epilogue_as<N, Activation::GELU_TANH, kStage>(a, out, acc, scale, e, row0, rows, o, tok0, oc);
      break;
    default: act_epilogue_as<N, Activation::SWIGLUOAI, kStage>(a, out, acc, scale, e, row0, rows, o, tok0, oc); break;
  }
}

// Why the 4-bit GEMM1 + activation cannot take `act` for weights of n rows (nullptr: it can).
// bf16_rows: the output is bf16 rows for a quantise pass (ROW / NVFP4), else GEMM2's bf16 operand.
inline const char* w4_act_refusal_common(const ActivationParams& act, int64_t n, bool bf16_rows) {
  if (act.act == Activation::RELU2) return "relu2 is not a gated activation";
  if (act.R != 2 * act.N || n != act.R) return "GEMM1's rows are not the gate and up rows of N outputs";
  if (act.dq.kind != Dequant::GENERIC) return "a dequant other than the 4-bit formats' (GENERIC)";
  if (act.act_dtype != DType::BF16) return "the activation dtype is not bf16";
  if (bf16_rows) {
    if (act.quant != Fp8Quant::ROW && act.quant != Fp8Quant::NVFP4)
      return "bf16 activation rows are for quantised activations (per-token fp8, nvfp4)";
  } else if (act.quant != Fp8Quant::NONE || act.op != Operand::BF16) {
    return "GEMM2's operand is not bf16 (ROW / NVFP4: bf16 rows and a quantise pass)";
  }
  return nullptr;
}

}  // namespace fusedmoe::cuda
