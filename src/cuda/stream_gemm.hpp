#pragma once
#include <cuda_runtime.h>

#include "cuda/grouped_gemm.hpp"
#include "cuda/moe_kernels.hpp"

namespace fusedmoe::cuda {

// Weight-streaming grouped GEMM (stream_gemm.cu) for the few-rows range (sm90_use_small_config)
// where the small-M kernels do not run (more rows, or GroupedGemmArgs::small_m_ok false): 2-D TMA maps
// made on the host, one expert and a run of 128-row weight blocks per CTA, wgmma on a ring
// of swizzled stages. fp32 or bf16 D; SM90_TMA (bf16 / fp16 / fp8) and SM90_FP8_BLOCK (block scales
// promoted per 128-wide k block). stream_gemm_applies: operands and alignment it can take.
bool stream_gemm_applies(const GroupedGemmArgs& a, GemmPath path);
// The token tile a launch takes: AUTO picks the 128-row tile for bf16 / fp16 calls and fp8 ones
// without block scales with more than 48 expected rows per active expert (stream_gemm.cu,
// wide_tile()), the 64-row tile otherwise; tests force either (16-bit and fp8-block: the same sums;
// fp8 without block scales sums the whole k in the wgmma's registers on the wide tile). TALL: the
// 256-row token tile (an N = 64 .. 256 wgmma by the expert's rows, one CTA per SM; 16-bit operands
// and fp8 without block scales, which sum as on the wide tile), which AUTO takes above 64 expected
// rows per active expert where stream_tall_tile_ok (grouped_gemm.hpp: long weight rows) lets the call
// come here.
enum class StreamTile { AUTO, NARROW, WIDE, TALL };
void stream_grouped_gemm(const GroupedGemmArgs& args, GemmPath path, cudaStream_t stream,
                         StreamTile tile = StreamTile::AUTO);
// Whether run_grouped_gemm gives the call to stream_grouped_gemm: every call of the few-rows range
// (sm90_use_small_config: at most 32 expected rows per active expert, 48 where k >= 512, 64 there
// for bf16 / fp16 and for fp8 without block scales) that the small-M kernels do not take, on SM90_TMA (bf16 / fp16 / fp8) and SM90_FP8_BLOCK. Measured
// against the CUTLASS swap-AB configs in the same call (H200, 2026-11-26,
// bench/results/2026-11-26-h200-stream-gemm/v2-wgmma): layer 0.80-0.99x at every such point of
// Qwen3-30B-A3B, DeepSeek-V3 TP1 / TP8 and Mixtral (M = 8..512; bf16, fp8-tensor, fp8-block); at
// 33-48 rows against the large configs 0.90-0.99x (H100, bench/results/2026-11-26-stream-64rows).
inline bool stream_gemm_takes(const GroupedGemmArgs& a, GemmPath path) {
  return (path == GemmPath::SM90_TMA || path == GemmPath::SM90_FP8_BLOCK) && !small_m_takes(a, path) &&
         sm90_use_small_config(a) && stream_gemm_applies(a, path);
}

// At decode sizes where the layer's decode fusions pay (the small-M kernels would run GEMM1 +
// activation and GEMM2 + finalize), GEMM1 runs here instead when its grid - one CTA per 128 weight
// rows of each expert that can have rows - has at least a third of an SM count of CTAs (the
// backend also asks that no fusion be lost). Kept rule measured (H200, 2026-11-26,
// bench/results/2026-11-26-decode-stream/final3): layer 0.86-0.96x at 1-2 tokens on Qwen3-30B-A3B
// (96 / 192 CTAs), DeepSeek-V3 TP1 bf16 0.87x (256 / 512), TP8 at 2 tokens 0.95-0.99x (64);
// DeepSeek-V3 TP8 at one token (32 CTAs of 0.9 MB) streamed was 1.21-1.36x slower (explore/),
// hence the bound.
inline bool stream_gemm1_decode_pays(const GroupedGemmArgs& g1) {
  return 3 * ((g1.n + 127) / 128) * active_groups(g1) >= g1.sm_count;
}

// GEMM1 and the gated activation in one stream-GEMM kernel (no h, no activation kernel) for the
// calls stream_gemm_takes on SM90_TMA: a weight block is the gate and the up rows of 64 outputs
// (a 5-D TMA map orders them so that each consumer thread holds both sums of an output), and the
// epilogue stores p.out as the activation kernel would (activation_store.cuh): bf16 / fp16, or
// static per-tensor fp8; dequant NONE or TENSOR; halves or interleaved rows, either order; N a
// multiple of 8. Same sums as stream_grouped_gemm (the same wgmma steps per weight row).
bool stream_gemm1_act_applies(const GroupedGemmArgs& g1, GemmPath path, const ActivationParams& p);
void stream_gemm1_activation(const GroupedGemmArgs& g1, const ActivationParams& p, cudaStream_t stream,
                             StreamTile tile = StreamTile::AUTO);

// The same for fp8-block GEMM1 (path SM90_FP8_BLOCK, block scales promoted per k block as
// stream_grouped_gemm): the epilogue writes the activation as bf16 rows [rows, N] to act_bf16 (h's
// buffer), which the activation kernel's quantise-only pass (ActivationParams::act_bf16) turns into
// GEMM2's 1 x 128 block-quantised operand - the values of the stream GEMM + activation kernel pair,
// which rounds the activation to bf16 before it quantises too. Halves rows, N a multiple of 128.
bool stream_gemm1_block_act_applies(const GroupedGemmArgs& g1, GemmPath path, const ActivationParams& p);
void stream_gemm1_block_activation(const GroupedGemmArgs& g1, const ActivationParams& p, void* act_bf16,
                                   cudaStream_t stream, StreamTile tile = StreamTile::AUTO);

// The same for fp8-channel GEMM1 (path SM90_TMA, per-channel dequant: each sum times its row's
// activation scale and its column's weight scale, as the activation kernel's fix_h): the
// activation written as bf16 rows [rows, N] to act_bf16 (h's buffer), which the activation kernel's
// quantise-only pass turns into GEMM2's per-row fp8 operand - the large-batch path's
// (run_grouped_gemm1_channel_act) steps in the few-rows range.
bool stream_gemm1_channel_act_applies(const GroupedGemmArgs& g1, GemmPath path, const ActivationParams& p);

// Whether those two (bf16 / static fp8-tensor, fp8-channel; not fp8-block) gather GEMM1's rows by
// token from x ([tokens, k] of the operand type, 16-byte aligned; GroupedGemmArgs::gather_x), as
// the CUTLASS GEMM1 does (sm90_gemm1_gather_applies, the same Gemm1Gather mode): the producer
// warp's cp.async copies instead of TMA boxes of the permuted operand.
bool stream_gemm1_gather_applies(const GroupedGemmArgs& g1, GemmPath path, const ActivationParams& p, const void* x,
                                 int64_t tokens);
void stream_gemm1_channel_activation(const GroupedGemmArgs& g1, const ActivationParams& p, void* act_bf16,
                                     cudaStream_t stream, StreamTile tile = StreamTile::AUTO);

}  // namespace fusedmoe::cuda
