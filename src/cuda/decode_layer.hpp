#pragma once
// The whole expert layer of one token in one kernel (decode_layer.cu): routing ids -> GEMM1 +
// activation -> a grid-wide barrier -> GEMM2 + the top-k sum. For small experts at one token
// (Qwen3-30B-A3B, DeepSeek-V3 TP8), where the chain of three kernels (plan + gather, GEMM1 +
// activation, GEMM2 + finalize) spends much of its time starting and draining each kernel.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/grouped_gemm.hpp"
#include "cuda/moe_kernels.hpp"
#include "cuda/w4_gemm.hpp"

namespace fusedmoe::cuda {

struct DecodeLayerParams {
  const int32_t* ids = nullptr;         // [topk] global expert ids of the token
  const int32_t* expert_map = nullptr;  // optional [num_global]: global -> local id or -1
  int num_experts = 0;                  // local experts
  int64_t num_global = 0;
  // GEMM1's operand: x, x_dtype, K, topk, topk_weights; op, quant (NONE or TENSOR_STATIC), scale.
  GatherParams gather;
  const void* w13 = nullptr;  // [E, R, K]
  const void* w2 = nullptr;   // [E, K, N]
  // The activation: R = 2N, N, act, order, interleaved, bias, dq, act_dtype, quant / scale of GEMM2's
  // operand; out: GEMM2's operand, [topk, N] (row = slot), written and read inside the kernel.
  ActivationParams act;
  // The top-k sum: K, topk, topk_weights, bias, dq, out, out_dtype (M = 1; y, slot_row and
  // row_expert are not used).
  FinalizeParams fin;
  // fp8-block: the weights' 128 x 128 block scales ([E, R/128, K/128], [E, K/128, N/128]);
  // fp8-block / fp8-channel / dynamic fp8-tensor: an fp32 [topk, N] row for the activation before
  // its quantisation.
  const float* w13_scale = nullptr;
  const float* w2_scale = nullptr;
  float* stage = nullptr;
  // 4-bit weights (decode_layer_w4.cu: MXFP4 / NVFP4 with bf16 activations, MXFP4 with per-token
  // fp8 activations, W4A8, NVFP4 W4A4): the packed weights and scales of both GEMMs (w13 / w2 above
  // unused); GEMM1 / GEMM2 dequant GENERIC; fp8 / nvfp4 activations: `stage` as for fp8-channel.
  bool w4 = false;
  W4Weights w4_13, w4_2;
  int sm_count = 0;
  // fp8 kernel: the last warp prefetches the first GEMM1 load round while the others quantise x
  // (set by the launcher: fp8-channel, decode_layer.cu dl_prefetch_on).
  bool prefetch_first_round = false;
  // GEMM1 task order (set by the launchers, decode_layer_common.cuh first_task): true = each
  // round's tasks fill half 0 of every CTA before half 1 (a last, partial round spreads over
  // CTAs instead of giving both halves of the first CTAs one more task).
  bool half_major_tasks = true;
  // 4-bit kernel, NVFP4 activations (W4A4): the staged activation's 16-wide blocks quantised with the per-value loop
  // unrolled (set by the launcher; FUSEDMOE_DL_NVFP4_UNROLLED=0 the rolled loop, as before 2026-11-28).
  bool nvfp4_unrolled = true;
};

// Largest top-k the kernel takes (its GEMM2 keeps every slot's W2 slice in shared memory).
constexpr int64_t kDecodeLayerMaxTopk = 8;

// Output columns per CTA (a multiple of 16: one MMA row block) when `sm_count` CTAs split K.
int64_t decode_layer_cols(int64_t K, int sm_count);
// Dynamic shared memory of the kernel: every slot's W2 rows of the CTA's columns and their bias,
// x, the GEMM2 operand rows (e4m3; copied in by the static mode, quantised by the others), and
// for fp8-channel the W2 column scales of the CTA's columns.
int64_t decode_layer_smem_bytes(int64_t K, int64_t N, int64_t topk, int sm_count, bool channel = false);
// Whether the kernel takes the call: one token, at most 8 slots, no router weight on the input;
// fp8-tensor with static or dynamic per-tensor scales (dequant TENSOR), fp8-block with K and N
// multiples of 128, or fp8-channel (16-bit layers measured slower than the chain); a gated
// activation (R = 2N); K and N multiples of 16; 16-byte aligned weights, x, operand buffer and
// GEMM2 bias; and the W2 slices within shared memory.
bool decode_layer_applies(const DecodeLayerParams& p);
// The same for the 4-bit kernel (decode_layer_w4.cu): MXFP4 / NVFP4 weights with bf16 activations,
// MXFP4 with per-token fp8 activations, W4A8 (int4, fp8 activations), NVFP4 W4A4.
int64_t decode_layer_w4_cols(int64_t K, int sm_count);
int64_t decode_layer_w4_smem_bytes(const DecodeLayerParams& p);
bool decode_layer_w4_applies(const DecodeLayerParams& p);
void launch_decode_layer_w4(const DecodeLayerParams& p, cudaStream_t stream);
// Launches it (cooperative: every CTA resident, one per SM); throws where it does not apply.
void launch_decode_layer(const DecodeLayerParams& p, cudaStream_t stream);

}  // namespace fusedmoe::cuda
