#pragma once
// The grouped GEMM of both MoE GEMMs: for each expert g,
//   D[rows of g] = A[rows of g] x B[g]^T      (A [rows, k], B [groups, n, k], D [rows, n], all row-major)
// with fp32 accumulation and an unscaled D (dequant scales, bias and activation are applied
// by the next stage), fp32 on every path; the SM90 large-M instances of bf16 / fp8 operands can
// also round D to bf16 (d_dtype, sm90_bf16_d_applies). The rows of each expert come from device
// offsets, so nothing about the routing crosses to the host.
//
// Paths:
//   SM90_TMA  CUTLASS 3.x ptr-array TMA warp-specialised grouped GEMM (wgmma); its per-group
//             problem shapes and pointers are built on the device by a small kernel; one or two
//             template instances per .cu file (sm90_grouped_gemm_<family>.cu).
//   SM90_FP8_BLOCK  CUTLASS ptr-array grouped GEMM with blockwise-scaled fp8 operands (fp8-block:
//             DeepSeek-V3 1x128 activation / 128x128 weight scales promoted per 128-wide K block
//             inside the mainloop; D is the dequantised fp32 result), sm90_grouped_gemm_fp8_blockwise.cu.
//   SIMT      a plain fp32 FMA tiled kernel (simt_grouped_gemm.cu): the FP32 format, and the
//             fallback for shapes TMA cannot address (k or n not a multiple of 16 bytes).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/moe_kernels.hpp"

namespace fusedmoe::cuda {

enum class GemmPath : uint8_t { SM90_TMA, SIMT, SM90_FP8_BLOCK };

struct GroupedGemmArgs {
  Operand op = Operand::BF16;
  const void* a = nullptr;  // [rows, k]
  const void* b = nullptr;  // [groups, n, k]
  void* d = nullptr;        // [rows, n] of d_dtype
  DType d_dtype = DType::F32;  // BF16 only where sm90_bf16_d_applies()
  int64_t n = 0, k = 0;
  int groups = 0;
  const int32_t* expert_offsets = nullptr;  // device [groups + 1]
  const int32_t* tile_offsets = nullptr;    // device [groups + 1] (SIMT: tiles of kSimtTileM rows)
  int64_t max_rows = 0;                     // host bound on the rows (grid size)
  // The expert offsets were written at least two chained kernels before this GEMM (the plan
  // kernel, then the gather), so the small-M kernel may read them before its chain_wait() and
  // start its weight loads early. False when the kernel right before wrote them (the plan inside
  // the gather, launch_plan_gather): they are final only after the wait.
  bool offsets_final_at_launch = true;
  // The caller lets decode-size calls run on the small-M kernels (small_m_takes). The layer lets
  // them only where the decode fusions pay (small_m_fusion_pays); elsewhere the stream GEMM was
  // the faster one, H100 (2026-11-26, bench/results/2026-11-26-h100-stream-vs-small-m): Mixtral
  // at 2 / 4 tokens 0.75-0.81x the layer time.
  bool small_m_ok = true;
  void* workspace = nullptr;                // grouped_gemm_workspace_bytes(), 256-byte aligned
  size_t workspace_bytes = 0;
  int sm_count = 0;
  int device = 0;
  // SM90_FP8_BLOCK only: fp32 block scales.
  //   a_scale: activation scales; the rows of expert g (row0 = offsets[g], rows_g of them) own
  //            the ceil(k/128) * rows_g floats from a_scale + row0 * ceil(k/128), column-major
  //            [ceil(k/128), rows_g] (fp8_block_scale_index in device_utils.cuh).
  //   b_scale: weight scales [groups, n/128, k/128] row-major (as the layer stores them).
  const float* a_scale = nullptr;
  const float* b_scale = nullptr;
  // fp8-block GEMM1 + activation only (sm90_gemm1_block_act_applies): scratch for the weight
  // scales in its tile order, [groups, n/64, k/128] (gemm1_block_act_scale_bytes).
  float* b_scale_tiles = nullptr;
  // GEMM1 + activation with its A rows gathered (sm90_gemm1_gather_applies): row r of the
  // expert-grouped order is row gather_row_slot[r] / gather_topk of gather_x ([tokens, k],
  // the operand type: hidden_states itself, or its static fp8 codes); `a` is then unused.
  const void* gather_x = nullptr;
  const int32_t* gather_row_slot = nullptr;
  int gather_topk = 1;
  // The per-channel weight scales applied in the epilogue (sm90_dequant_d_applies; fp8-channel
  // GEMM2 with a bf16 y): D[r, c] = acc x d_col_scale[g, c] in fp32, then rounded to bf16;
  // d_col_scale [groups, n]. (The per-row activation scale stays a per-slot factor of the finalize.)
  const float* d_col_scale = nullptr;
};

// The experts that can have rows: at most one per row (grid.y of the per-expert kernels).
inline int64_t active_groups(const GroupedGemmArgs& a) {
  return a.max_rows < a.groups ? a.max_rows : a.groups;
}

// The few-rows range: at most kSmallConfigMaxRowsPerGroup expected rows per active expert, or
// more where k >= kStreamLongKMinK: kStreamLongKMaxRowsPerGroup, and kStreamWideMaxRowsPerGroup
// for 16-bit operands (decode and small batches: the GEMMs stream weights). It was CUTLASS's
// swap-AB configs (weights on the MMA's 128-row side, tokens on a 64-wide N tile); since
// 2026-11-26 it is the stream GEMM (stream_gemm.hpp), and the SM90 instances serve the calls above
// it. 32 is the swap-AB configs' bound (at 64 rows per expert the large configs were faster than
// them: H100, 2026-11-21, bench/results/2026-11-21-h100-small-config-threshold).
// The stream GEMM at 48 rows per expert against the large configs (which pad 33-64 rows to a
// 128-row tile; H100, 2026-11-26, bench/results/2026-11-26-stream-64rows): layer 0.92-0.96x on
// Qwen3-30B-A3B (768 tokens), Mixtral (192) and DeepSeek-V3 TP1 (1536), but DeepSeek-V3 TP8 (1536)
// 1.01-1.08x: its GEMM2's k = 256 makes the stream GEMM's fp32 D (the large configs write bf16
// there) a third to three quarters of the weight bytes it streams. Hence the bound on k; 48 where
// k >= 512 against 32 (ab2): 0.90-0.99x at 33-48 rows on all four presets and bf16 / fp8-tensor /
// fp8-channel / fp8-block (32 points, geomean 0.951), 0.99-1.01x at 16 control points.
// 49-64 rows: with the 64-row token tile half the experts stream their weights twice (1.19-1.42x);
// with the 128-row tile (stream_gemm.cu; bench/results/2026-11-26-stream-wide-tile) bf16 layers
// were 0.91-1.00x the large configs' time (DeepSeek-V3 TP1 2048 tokens 0.909, TP8 2048 0.967,
// Mixtral 256 0.969, Qwen3 1024 0.997), fp8 ones 0.98-1.14x and fp8-block 1.09-1.30x: 64 for
// 16-bit operands; since 2026-11-27 also for fp8 without block scales, on the wide tile at two CTAs
// per SM without the per-stage promotion (stream_wide_tile_ok).
constexpr int64_t kSmallConfigMaxRowsPerGroup = 32;
constexpr int64_t kStreamLongKMaxRowsPerGroup = 48;
constexpr int64_t kStreamWideMaxRowsPerGroup = 64;
constexpr int64_t kStreamLongKMinK = 512;
// fp8 without block scales (a_scale is set for SM90_FP8_BLOCK only) takes the 128-row token tile
// too (at two CTAs per SM, summing a whole k in the wgmma's registers as the CUTLASS FP8FastAccum
// configs it replaces do; stream_gemm.cu). Same-binary A/B against the large configs (H100,
// 2026-11-27, bench/results/2026-11-27-h100-stream-wide2): Mixtral fp8-tensor 256 tokens 0.922,
// DeepSeek-V3 TP1 / TP8 fp8 2048 tokens 0.940 / 0.977, Qwen3-30B-A3B fp8 1024 tokens 0.957
// (fp8-channel 0.977). fp8-block stays at 48 rows: its wide tile keeps the per-block promotion
// (one CTA per SM) and lost 1.06-1.36x (bench/results/2026-11-27-h100-stream-fp8-wide).
inline bool stream_wide_tile_ok(const GroupedGemmArgs& a) {
  return a.op == Operand::BF16 || a.op == Operand::FP16 || (a.op == Operand::FP8 && a.a_scale == nullptr);
}
// 65..kStreamTallMaxRowsPerGroup expected rows per active expert with long weight rows: the stream
// GEMM's 256-row token tile (StreamTile::TALL: each CTA streams its weight block once for all of an
// expert's rows, the wgmma's N the rows rounded up to 32, where the large configs pad to 128-row
// tiles) for the calls stream_tall_tile_ok takes: 16-bit operands and fp8 without block scales
// (128 accumulators per thread leave no room for a promotion set), rows of at least
// kStreamTallMinRowBytes and at least kStreamTallMinN weight rows per expert, at most 144 expected
// rows per expert: measured winning at 128 (where the large configs pad 128 +- 11 rows to 1-2
// 128-row tiles) and losing at 192 (Mixtral-8x7B at 768 tokens: GEMM2 382 -> 429 us bf16, layer
// 1.02-1.03x; two 128-row tiles fit 192 +- 14 rows), not measured in between.
// Same-binary A/B, H100 (2026-11-27, bench/results/2026-11-27-h100-stream-tall): the tile runs at
// one CTA per SM, so each CTA's start and epilogue are exposed; it pays only where a CTA streams
// long rows without the fused activation's epilogue: Mixtral-8x7B's GEMM2 at 512 tokens (128 rows
// per expert, k = 14336) 423-438 -> 357-362 us bf16, 214-232 -> 188-190 us fp8, DeepSeek-V3 TP1's
// bf16 GEMM1 at 4096 tokens (14 KB rows, n = 8192) 6350 -> 6070 us. Every other call measured lost:
// DeepSeek-V3 TP8 GEMM1 (n = 512) 1.07-1.12x and its permute no longer gathered away, fp8 GEMM1s
// with 4-7 KB rows (DeepSeek-V3 TP1 1.11x, Mixtral 1.21x, Qwen3-30B-A3B 1.38x), GEMM2s with 4 KB
// rows (DeepSeek-V3 TP1 1.06-1.14x). Hence the bounds. Under the kept rule (run3, 3 interleaved
// pairs): Mixtral 512 tokens 0.938 / 0.948 / 0.942 (bf16 / fp8-tensor / fp8-channel), DeepSeek-V3
// TP1 4096 bf16 0.965, the other points 0.998-1.004.
constexpr int64_t kStreamTallMaxRowsPerGroup = 144;
constexpr int64_t kStreamTallMinRowBytes = 12 * 1024;
constexpr int64_t kStreamTallMinN = 4096;
// The rule's bounds (grouped_gemm.cpp): FUSEDMOE_STREAM_TALL=0 turns the tile off (same-binary A/B
// runs), =B sets the row-byte bound to B (n bound kept); set_stream_tall_rule for tests.
struct StreamTallRule {
  int64_t min_row_bytes;  // INT64_MAX: off
  int64_t min_n;
  int64_t max_rows_per_group = kStreamTallMaxRowsPerGroup;  // FUSEDMOE_STREAM_TALL_MAX_ROWS=R (diagnostic)
};
StreamTallRule stream_tall_rule();
void set_stream_tall_rule(StreamTallRule r);
inline bool stream_tall_tile_ok(const GroupedGemmArgs& a, const StreamTallRule& r) {
  return stream_wide_tile_ok(a) && a.k * (a.op == Operand::FP8 ? 1 : 2) >= r.min_row_bytes && a.n >= r.min_n;
}
inline bool stream_tall_tile_ok(const GroupedGemmArgs& a) { return stream_tall_tile_ok(a, stream_tall_rule()); }
inline int64_t stream_max_rows_per_group(const GroupedGemmArgs& a) {
  if (a.k < kStreamLongKMinK) return kSmallConfigMaxRowsPerGroup;
  const StreamTallRule r = stream_tall_rule();  // one read of the rule's bounds
  if (stream_tall_tile_ok(a, r)) return r.max_rows_per_group;
  return stream_wide_tile_ok(a) ? kStreamWideMaxRowsPerGroup : kStreamLongKMaxRowsPerGroup;
}
inline bool sm90_use_small_config(const GroupedGemmArgs& a) {
  const int64_t active = active_groups(a);
  return active > 0 && a.max_rows <= stream_max_rows_per_group(a) * active;
}

// Large-M GEMMs with short K (k <= kPingpongMaxK: Qwen3 / DeepSeek-TP8 down projections) and an
// fp32 D: the pingpong schedule (each consumer warpgroup owns a whole 128x128 tile, so one
// warpgroup's epilogue - the fp32 D store, which dominates when the mainloop is only a few K
// tiles - overlaps the other's MMAs). Long K, and a bf16 D (half the store), keep the cooperative
// 128x256 config: with GEMM2's y in bf16 it was the faster one, H100 (2026-11-22,
// bench/results/2026-11-22-h100-bf16-d-cooperative): DeepSeek-V3 TP8 layer at 2048 / 4096 tokens
// 0.94-0.96 (fp8) / 0.98-0.99 (bf16), Qwen3 at 4096 0.97-1.00.
constexpr int64_t kPingpongMaxK = 1024;
inline bool sm90_use_pingpong_config(const GroupedGemmArgs& a) {
  return a.k <= kPingpongMaxK && a.d_dtype == DType::F32 && !sm90_use_small_config(a);
}

// Whether the call's GEMM can write D in bf16: a large-M SM90 instance of bf16 or fp8 operands on
// SM90_TMA, or SM90_FP8_BLOCK, or the stream GEMM (the few-rows range, stream_gemm_takes); not the
// small-M kernels; n a multiple of 8 (16-byte D rows). The layer rounds GEMM2's y to bf16 there when its output is bf16: y is
// [tokens * topk, hidden], at 4096 tokens of DeepSeek-V3 TP8 0.94 GB in fp32 written by GEMM2
// and read back by the finalize (src/cuda/NOTES.md, "GEMM2's y in bf16"). On the stream GEMM
// since 2026-11-26 (H100, bench/results/2026-11-26-stream-bf16-y): layer 0.89-1.00x, DeepSeek-V3
// TP8 at 1024 tokens 0.89 (fp8) / 0.94 (bf16), where fp32 y was half the bytes of GEMM2's weights.
bool sm90_bf16_d_applies(const GroupedGemmArgs& a, GemmPath path);
// Whether the call's GEMM applies GroupedGemmArgs::d_col_scale in its epilogue: fp8 operands on
// SM90_TMA with a bf16 D (sm90_bf16_d_applies) - the stream GEMM in the few-rows range,
// sm90_grouped_gemm_fp8_d16_dequant.cu above it. The layer's fp8-channel GEMM2 takes it where its
// y is bf16, so the finalize no longer reads the [E, hidden] channel scales once per slot.
bool sm90_dequant_d_applies(const GroupedGemmArgs& a, GemmPath path);
// FUSEDMOE_GEMM2_DEQUANT=0 in the environment (read once): the layer keeps the dequant in the
// finalize instead - a diagnostic switch for same-binary A/B runs.
bool gemm2_dequant_switched_off();
// The sibling sync of the large-M GEMM1 instances (sm90_sibling_sync_mainloop.cuh): on unless
// FUSEDMOE_SIBLING_SYNC=0 in the environment (read once), a diagnostic switch for same-binary A/B runs.
bool sibling_sync_on();

// Small-M path (small_m_gemm.cu): a weight-streaming kernel for bf16 / fp16 / fp8 operands, used
// instead of the SM90 tile GEMMs for decode-like calls: at most kSmallMMaxRows rows and no more
// rows than experts, weight rows of at least kSmallMMinRowBytes (short rows are split over fewer
// lanes: small_m_gemm.cu). Any row distribution stays
// correct (rows are taken kRowBatch at a time); only the expected one decides.
constexpr int64_t kSmallMMaxRows = 16;
constexpr int64_t kSmallMMinRowBytes = 256;  // shorter rows: 16 or fewer 16-byte chunks

// Whether the decode fusions (small_m_activation.cu: GEMM1 + activation; small_m_finalize.cu:
// GEMM2 + finalize) pay for a call of `tokens` tokens routed to `topk` of `experts` experts: at
// one token always; beyond it only where tokens rarely share an expert ((tokens - 1) * topk other
// slots over the experts <= 1/8). The fused finalize streams an expert's weights once per token
// that hits it. Measured on an H100 (2026-11-21, bench/results/2026-11-21-h100-small-m-fusion-ab):
// 4-10% faster at M = 1 on every preset (DeepSeek-V3 TP1 fp8-channel: even) and 1-9% at M = 2 on
// Qwen3 / DeepSeek-V3 (E = 128 / 256, top-8), but Mixtral (E = 8, top-2) at M = 2 was 2-5% slower
// with either fusion.
inline bool small_m_fusion_pays(int64_t tokens, int64_t topk, int64_t experts) {
  return tokens == 1 || (tokens > 1 && (tokens - 1) * topk * 8 <= experts);
}
bool small_m_gemm_applies(const GroupedGemmArgs& a);
// fp8-block on the small-M path: fp8 operands, n and k multiples of 128, a_scale and b_scale set.
bool small_m_block_scales_ok(const GroupedGemmArgs& a);
// Whether fp8-block decode GEMMs take the small-M path: experts of at most 8 MiB of weights per
// GEMM. Measured on an H100 (2026-11-21, bench/results/2026-11-21-h100-fp8-block-small-m): layer
// at M = 1 / 2 Qwen3-30B-A3B (3 / 1.5 MiB) -13% / -3%, DeepSeek-V3 TP8 (3.5 / 1.75 MiB) -25% /
// -14%; but DeepSeek-V3 TP1 (28 / 14 MiB) +4% / +10% and Mixtral (112 / 56 MiB) -10% / +18%
// (stage times: TP1 GEMM2 + finalize 59.5 -> 62.0 us, Mixtral M=2 GEMM1 105 -> 121 us; with that
// many weight tiles the blockwise CUTLASS GEMM already streams them well).
constexpr int64_t kSmallMBlockMaxExpertBytes = int64_t{8} << 20;
inline bool small_m_block_pays(const GroupedGemmArgs& a) { return a.n * a.k <= kSmallMBlockMaxExpertBytes; }
// Whether a GEMM of `path` runs on the small-M kernels (run_grouped_gemm and the decode fusions
// ask the same question): SM90_TMA where small_m_gemm_applies; SM90_FP8_BLOCK also needs the
// block scales and experts small enough to pay; SIMT never.
inline bool small_m_takes(const GroupedGemmArgs& a, GemmPath path) {
  if (!a.small_m_ok) return false;
  if (path == GemmPath::SM90_TMA) return small_m_gemm_applies(a);
  if (path == GemmPath::SM90_FP8_BLOCK)
    return small_m_gemm_applies(a) && small_m_block_scales_ok(a) && small_m_block_pays(a);
  return false;
}
// block_scaled: the SM90_FP8_BLOCK problem (a_scale / b_scale applied per 128-wide k block, D
// dequantised), which needs small_m_block_scales_ok().
void small_m_grouped_gemm(const GroupedGemmArgs& args, cudaStream_t stream, bool block_scaled = false);

const char* gemm_path_name(GemmPath p);
// Whether the SM90 instances of this operand type were compiled (FUSEDMOE_SKIP_GPU_FORMATS).
bool sm90_gemm_built(Operand op);
// Whether TMA can address these operands: 16-byte aligned rows and base pointer.
bool sm90_gemm_shape_ok(Operand op, int64_t n, int64_t k, const void* b);
size_t grouped_gemm_workspace_bytes(Operand op, GemmPath path, int groups, int sm_count);
void run_grouped_gemm(const GroupedGemmArgs& args, GemmPath path, cudaStream_t stream);

// ---- per-family entry points (sm90_grouped_gemm_<family>.cu, simt_grouped_gemm.cu) ----
size_t sm90_grouped_gemm_bf16_workspace(int groups, int sm_count);
void sm90_grouped_gemm_bf16(const GroupedGemmArgs& args, cudaStream_t stream);
// The large-M instances with a bf16 D (sm90_grouped_gemm_<family>_d16.cu; sm90_bf16_d_applies).
size_t sm90_grouped_gemm_bf16_d16_workspace(int groups, int sm_count);
void sm90_grouped_gemm_bf16_d16(const GroupedGemmArgs& args, cudaStream_t stream);
size_t sm90_grouped_gemm_fp8_d16_workspace(int groups, int sm_count);
void sm90_grouped_gemm_fp8_d16(const GroupedGemmArgs& args, cudaStream_t stream);
size_t sm90_grouped_gemm_fp8_d16_dequant_workspace(int groups, int sm_count);  // x d_col_scale
void sm90_grouped_gemm_fp8_d16_dequant(const GroupedGemmArgs& args, cudaStream_t stream);
size_t sm90_grouped_gemm_fp16_workspace(int groups, int sm_count);
void sm90_grouped_gemm_fp16(const GroupedGemmArgs& args, cudaStream_t stream);
size_t sm90_grouped_gemm_fp8_workspace(int groups, int sm_count);
void sm90_grouped_gemm_fp8(const GroupedGemmArgs& args, cudaStream_t stream);
// fp8-block: whether the blockwise instances were compiled, and whether they take (n, k).
bool sm90_fp8_blockwise_built();
bool sm90_fp8_blockwise_shape_ok(int64_t n, int64_t k, const void* b, const char** why);
size_t sm90_grouped_gemm_fp8_blockwise_workspace(int groups, int sm_count);
void sm90_grouped_gemm_fp8_blockwise(const GroupedGemmArgs& args, cudaStream_t stream);
size_t sm90_grouped_gemm_fp8_blockwise_d16_workspace(int groups, int sm_count);  // bf16 D, large-M
void sm90_grouped_gemm_fp8_blockwise_d16(const GroupedGemmArgs& args, cudaStream_t stream);
void simt_grouped_gemm(const GroupedGemmArgs& args, cudaStream_t stream);

// ---- GEMM1 with the activation stage in its epilogue (sm90_gated_act_epilogue.cuh) ----
// Whether GEMM1 `g` on `path` with activation `ap` runs as one kernel that writes GEMM2's operand
// (ap.out) instead of h: the large-M SM90 instances of bf16 or fp8 operands (not the small-M
// kernels or the swap-AB configs), gate / up rows interleaved or in halves (halves: N even
// and half a w13 row a 16-byte multiple, for the paired row-block loads), a gated activation, bf16 hidden
// states (the activation dtype), dequant none or per-tensor, and an output the epilogue can
// finish alone (a 16-bit operand or a static fp8 tensor scale; dynamic and per-row fp8 scales
// need every output's amax first).
bool sm90_gemm1_act_applies(const GroupedGemmArgs& g, GemmPath path, const ActivationParams& ap);
// Whether the GEMM1 + activation of sm90_gemm1_act_applies gathers its A rows from a token-major
// tensor x ([tokens, g.k] of the operand type, 16-byte aligned; GroupedGemmArgs::gather_x): the
// permute then writes no slot rows. Under Gemm1Gather::AUTO only where it pays (few column tiles,
// a long k loop, at most 128 rows per expert on average: DeepSeek-V3 TP8-like shapes at large
// batches; sm90_gather_a_mainloop.cuh), everywhere it can under ON, never under OFF.
bool sm90_gemm1_gather_applies(const GroupedGemmArgs& g, GemmPath path, const ActivationParams& ap, const void* x,
                               int64_t tokens);
// AUTO unless the environment sets FUSEDMOE_GEMM1_GATHER=0 (OFF) or =1 (ON) - read once: a
// diagnostic switch for same-binary A/B runs - or set_gemm1_gather_mode() (tests).
enum class Gemm1Gather : uint8_t { AUTO, ON, OFF };
Gemm1Gather gemm1_gather_mode();
void set_gemm1_gather_mode(Gemm1Gather mode);
// The fused GEMM1 + activation kernels: how many times each was launched in this process (counted
// on the host by its entry point), for tests that must know which path a layer took - the fused
// and unfused paths give the same bits, so the output cannot tell.
enum class FusedGemm1 { BF16_OR_FP8_TENSOR, FP8_CHANNEL, FP8_BLOCK, FOUR_BIT, kCount };
void count_fused_gemm1_launch(FusedGemm1 kind);
// The epilogue's store for the fused GEMM1s whose quantisation runs afterwards (fp8-channel,
// fp8-block): the rounded activation output as bf16 rows into act_bf16 (no quantisation).
ActivationParams bf16_rows_output(const ActivationParams& ap, void* act_bf16);
int64_t fused_gemm1_launches(FusedGemm1 kind);
// Of those (BF16_OR_FP8_TENSOR and FP8_CHANNEL, CUTLASS or stream GEMM), the launches with A
// gathered by token (GroupedGemmArgs::gather_x), counted by their entry points.
int64_t gathered_gemm1_launches();
void count_gathered_gemm1_launch();
void run_grouped_gemm1_act(const GroupedGemmArgs& g, const ActivationParams& ap, cudaStream_t stream);
size_t sm90_grouped_gemm_bf16_act_workspace(int groups, int sm_count);
void sm90_grouped_gemm_bf16_act(const GroupedGemmArgs& args, const ActivationParams& act, cudaStream_t stream);
size_t sm90_grouped_gemm_fp8_act_workspace(int groups, int sm_count);
void sm90_grouped_gemm_fp8_act(const GroupedGemmArgs& args, const ActivationParams& act, cudaStream_t stream);

// fp8-channel at large batches (sm90_grouped_gemm_fp8_act_channel.cu): the same GEMM1 + activation
// with per-channel dequant in the epilogue (a_row[r] x w[e, col]), writing the activation output
// rounded to bf16 to act_bf16 ([rows, N]); the per-row quantisation then runs on those rows
// (ActivationParams::act_bf16). Where sm90_gemm1_act_applies' mainloop runs, ROW quantisation of
// GEMM2's input, N a multiple of 8.
bool sm90_gemm1_channel_act_applies(const GroupedGemmArgs& g, GemmPath path, const ActivationParams& ap);
void run_grouped_gemm1_channel_act(const GroupedGemmArgs& g, const ActivationParams& ap, void* act_bf16,
                                   cudaStream_t stream);
size_t sm90_grouped_gemm_fp8_act_channel_workspace(int groups, int sm_count);
void sm90_grouped_gemm_fp8_act_channel(const GroupedGemmArgs& args, const ActivationParams& act, cudaStream_t stream);

// fp8-block at large batches (sm90_grouped_gemm_fp8_blockwise_act.cu): the blockwise GEMM1 with
// the gated activation in its epilogue, writing the activation output rounded to bf16 to act_bf16
// ([rows, N]); the 1 x 128 quantisation then runs on those rows (ActivationParams::act_bf16). Where
// the large blockwise instance would run GEMM1 (not the small-M or stream GEMMs), with an fp32 D
// asked, b_scale_tiles set, a gated activation, bf16 hidden states and N a multiple of 128.
bool sm90_gemm1_block_act_applies(const GroupedGemmArgs& g, GemmPath path, const ActivationParams& ap);
void run_grouped_gemm1_block_act(const GroupedGemmArgs& g, const ActivationParams& ap, void* act_bf16,
                                 cudaStream_t stream);
inline size_t gemm1_block_act_scale_bytes(int groups, int64_t n, int64_t k) {
  return static_cast<size_t>(groups) * static_cast<size_t>(n / 64) * static_cast<size_t>((k + 127) / 128) * 4;
}
size_t sm90_grouped_gemm_fp8_blockwise_act_workspace(int groups, int sm_count);
void sm90_grouped_gemm_fp8_blockwise_act(const GroupedGemmArgs& args, const ActivationParams& act, cudaStream_t stream);

}  // namespace fusedmoe::cuda
