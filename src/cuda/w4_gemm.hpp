#pragma once
// Grouped GEMMs with 4-bit expert weights (w4_gemm.cu): W4A8 int4, MXFP4 and NVFP4.
//
// Hopper has no 4-bit tensor-core type, so the weights are decoded to a 16-bit type the tensor
// cores multiply, *exactly*:
//   MXFP4 / NVFP4  e2m1 x block scale (e8m0, or e4m3) -> bf16   (a 2-bit x <=4-bit product)
//   W4A8           int4 x bf16 group scale            -> fp16   (<= 11 significant bits: exact
//                  while |scale| lies in [2^-14, 8188]; outside, fp16 rounds / overflows)
// and the activations reach the GEMM as 16-bit values of the same type holding exactly the
// quantised activation (bf16 as is, e4m3 codes, or e2m1 x e4m3 for NVFP4 W4A4) without its
// per-row / per-expert scale, which the next stage applies with the weights' global scale
// (Dequant::GENERIC). So every product is the oracle's product; sums are fp32.
//
// Three ways to run it, chosen on the host from the expected rows per expert:
//   mma      (decode, small batches) one kernel streams the packed weights once per 8..32 tokens
//            of an expert, decodes them in registers and multiplies with mma.sync m16n8k16
//            (weights on the MMA's M side, tokens on N); fp32 sums in a fixed order. Its tokens'
//            activations reach the MMAs from registers or (W4A8's tiles, MXFP4 / NVFP4's 16- and
//            32-token tiles, their 8-token ones at k <= 2048) from a shared-memory ring copied with
//            the weight stages (w4_gemm.cu kSx, w4_mma_force_smem_x below); MXFP4 / NVFP4's
//            16- / 32-token tiles give each warp two 16-row weight tiles (w4_gemm.cu kRT).
//   wgmma    (large batches, MXFP4 / NVFP4 with k % 64 == 0; w4_wgmma.cu) the weights are decoded
//            inside a wgmma mainloop, each packed byte read once per token tile of up to 256 rows.
//            W4A8 (w4a8_wgmma.cu): int4 decoded to e5m2 inside an fp8 wgmma mainloop on e4m3
//            activation codes, the group scale on each 128-wide partial sum, token tiles of 160.
//   dequant  (large batches, MXFP4 / NVFP4 GEMMs the wgmma kernel cannot take: k % 64 != 0) a
//            chunk of experts' weights is decoded to bf16 in the workspace, then the SM90 CUTLASS
//            bf16 grouped GEMM runs on it; chunk after chunk, so the buffer stays bounded
//            (kW4DequantBudget).
// (Until 2026-11-22 W4A8's large batches decoded int4 to e4m3 codes in the workspace and ran a
// CUTLASS groupwise fp8 GEMM, or a 16-bit decode in builds without it; the wgmma kernel replaced
// both: bench/results/2026-11-22-h100-w4a8-wgmma.)
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/grouped_gemm.hpp"
#include "cuda/moe_kernels.hpp"
#include "fusedmoe/config.hpp"

namespace fusedmoe::cuda {

struct W4Weights {
  Format format = Format::MXFP4;   // W4A8_INT4, MXFP4 or NVFP4
  bool uint4b8 = false;            // W4A8: stored q + 8 (else two's complement)
  bool swizzled = false;           // MXFP4 / NVFP4: scales in the 128x4 swizzled layout
  const uint8_t* w = nullptr;      // [E, n, k/2] packed, element 2i in the low nibble
  const void* scale = nullptr;     // W4A8 bf16 [E, n, k/128]; MXFP4 e8m0 / NVFP4 e4m3 [E, n, k/bs] (or swizzled)
  int64_t n = 0, k = 0;
};

// The mma path's GEMM: D[rows of g] = A[rows of g] x decode(W[g])^T, fp32 D.
// a: [rows, k] fp16 (W4A8, in this kernel's k order: KOrder::W4_MMA, w4_kperm.cuh) or bf16
// (MXFP4 / NVFP4, as is) operand.
// d2 (w4_mma_split_pays, sm_count its argument): the k range split in two halves, their fp32 sums into d and d2 (the
// caller adds them: FinalizeParams::y2); a call the function refuses throws. sm_count is also the SM count of the
// launch rule for under-one-wave grids (w4_gemm.cu launch_instance; 0: queried).
void w4_mma_grouped_gemm(const W4Weights& w, const void* a, float* d, int groups, const int32_t* expert_offsets,
                         int64_t max_rows, cudaStream_t stream, float* d2 = nullptr, int sm_count = 0);
// Whether w4_mma_grouped_gemm splits k in two for this call: NVFP4 on the lean decode, 8-token passes, k >= 1024, and
// both halves' warps resident at once on sm_count SMs (one-token grids: gpt-oss-120b's GEMM2 at 720 warps for 132
// SMs). FUSEDMOE_W4_SPLIT=0: never.
bool w4_mma_split_pays(const W4Weights& w, int groups, int64_t max_rows, int sm_count);

// Decodes the MXFP4 / NVFP4 weights of experts [e0, e0 + count) that have rows into out
// [count, n, k] (bf16); experts without rows are skipped.
void w4_dequantize_weights(const W4Weights& w, int e0, int count, const int32_t* expert_offsets, void* out,
                           cudaStream_t stream);

// What the shapes need: k a multiple of 32 (one lane reads 32 values = 16 bytes of a row).
// GEMM1 with the activation stage in the mma kernel's epilogue (decode sizes): writes act.out (GEMM2's operand, in
// act.korder) instead of h, the same bytes as w4_mma_grouped_gemm + launch_activation. For MXFP4 / NVFP4 on the lean
// decode, at most 6 expected rows per expert (the 8-token tiles: w4_gemm.cu kTile8MaxRows), bf16 activations without quantisation, gated activations, dequant NONE
// or GENERIC; w4_mma_act_refusal says why a call does not qualify (nullptr: it does).
const char* w4_mma_act_refusal(const W4Weights& w13, const ActivationParams& act, int groups, int64_t max_rows);
// sm_count: the device's SMs, for the same launch rule (0: queried).
void w4_mma_gemm1_activation(const W4Weights& w13, const void* a, const ActivationParams& act, int groups,
                             const int32_t* expert_offsets, int64_t max_rows, cudaStream_t stream, int sm_count = 0);

// Tests only: the mma kernel's weight stages per warp on 8-token grids - 0 the rule (3 where the grid has at most 16
// warps per SM and k >= 4096, FUSEDMOE_W4_FEW_STAGES=0: never; else 2), 2 or 3 always. Not thread-safe; the same
// bits whichever.
void w4_mma_force_stages(int stages);

// Tests only: the 2-stage tiles' activations through shared memory (kSx) or registers - 0 the rule (W4A8's tiles and
// MXFP4 / NVFP4's 16- / 32-token tiles at every k, their 8-token tiles at k <= 2048 but MXFP4's tail instance;
// FUSEDMOE_W4_SMEM_X=0: never, =2: every k), 1 registers, 2 shared memory wherever an instance exists (any k). Not
// thread-safe; the same bits whichever.
void w4_mma_force_smem_x(int mode);
// Tests only: what the last mma kernel launch ran (so a test of a forced form can assert it reached that form) -
// tokens per pass in 8-token tiles (1, 2, 4), weight stages per warp, activations through shared memory (kSx), 16-row
// weight tiles per warp (kRT).
struct W4MmaLaunch {
  int tiles = 0, stages = 0;
  bool smem_x = false;
  int row_tiles = 0;
};
W4MmaLaunch w4_mma_last_launch();

bool w4_shape_ok(const W4Weights& w, const char** why);
// Whether the mma kernel of format f decodes by mask-multiply on an operand stored pre-paired (KOrder::W4_MMA; the
// caller stores GEMM operands so): MXFP4 and NVFP4, unless FUSEDMOE_W4_LEAN=0 (both) or FUSEDMOE_W4_LEAN_NV=0
// (NVFP4 only; same-binary A/B switches). W4A8 is stored so anyway (its int4 way).
bool w4_mma_lean(Format f);

// Host choice between the two ways: the large-batch way once the expected rows per active expert
// reach this (the mma kernel re-reads the weights once per 32 tokens of an expert and its
// mma.sync peak is well below wgmma's).
constexpr int64_t kW4DequantMinRowsPerExpert = 48;
// With the wgmma kernel (no decoded copy) the large-batch way pays from fewer rows. Its first
// version paid from 32 (H100, bench/results/2026-11-22-h100-w4-wgmma-ab: 16 rows 0.95-1.08x);
// after its instruction diet (H200, bench/results/2026-11-22-h200-w4-kernel-diet-ab), at 16 rows
// per expert the layer takes 0.77-0.87x the mma kernel's time (Qwen3 M = 256, DeepSeek-V3 TP1
// M = 512, gpt-oss nvfp4 M = 512), except gpt-oss-120b mxfp4 M = 512 (1.06x); at 8 rows
// 1.12-1.61x. Since the mma kernel's 16- and 32-token tiles take their activations through shared memory (kSx,
// 2026-11-29) the mma kernel wins further (H200 same-binary A/Bs, FUSEDMOE_W4_WGMMA_MIN_ROWS,
// bench/results/2026-11-29-h200-e2m1-smem-x16 r2 / r3; layers, mma / wgmma): W4A8 at 16 / 24 / 28 rows 0.81 / 0.92 /
// 0.97 on Qwen3-30B-A3B, 0.95 / 0.97 / 1.08 on DeepSeek-V3 TP1; MXFP4 / NVFP4 at 16-28 rows 0.75-0.98 on the three
// presets, at 32 rows 0.99-1.12. So the wgmma way from 26 rows (W4A8) and 30 rows (MXFP4, NVFP4).
constexpr int64_t kW4A8WgmmaMinRowsPerExpert = 26, kW4E2m1WgmmaMinRowsPerExpert = 30;
inline int64_t w4_wgmma_min_rows_per_expert(Format f) {
  return f == Format::W4A8_INT4 ? kW4A8WgmmaMinRowsPerExpert : kW4E2m1WgmmaMinRowsPerExpert;
}
inline bool w4_use_dequant(int64_t max_rows, int groups, int64_t min_rows = kW4DequantMinRowsPerExpert) {
  const int64_t active = max_rows < groups ? max_rows : groups;
  return active > 0 && max_rows >= min_rows * active;
}
// MXFP4 / NVFP4 at many tokens per expert (w4_wgmma.cu): the weights decoded inside a wgmma
// mainloop, no decoded copy (replaces the dequant way where it applies: k % 64 == 0). a: the bf16
// operand [rows, k] in this kernel's k order (KOrder::W4_WGMMA, w4_kperm.cuh).
bool w4_wgmma_shape_ok(const W4Weights& w);
// Which instance of that kernel a call takes by its expected rows per expert (max_rows / active
// experts), before the FUSEDMOE_W4_PAIR / _PAIR_ALL / _PAIR_WIDE switches: NONE (two wgmmas per k16 step
// for a tile's two token halves), FULL (193..248 or > 288 rows: full tiles on one m64n256k16), ALL (113..192
// rows: every tile with a second half on one m64n160 / n192 / n256), WIDE (249..288 rows: FULL's pairing on
// 288-token tiles, rows 256..287 on a third m64n32k16 that shares the decoded weights).
// FINE (113..160 rows and a long k - k >= kW4FineMinK, the fused GEMM1 + activation k >= kW4FineMinKAct: ALL's
// pairing with second halves of 8 .. 32 rows in steps of 8; ALL then 161..192 and at shorter k). act: the call
// is the fused GEMM1 + activation (w4_wgmma_gemm1_activation), else the fp32-D GEMM.
enum class W4WgmmaPair { NONE, FULL, ALL, WIDE, FINE };
constexpr int64_t kW4FineMinK = 2048, kW4FineMinKAct = 4096;
W4WgmmaPair w4_wgmma_pair_rule(int64_t max_rows, int groups, int64_t k, bool act);
void w4_wgmma_grouped_gemm(const W4Weights& w, const void* a, float* d, int groups, const int32_t* expert_offsets,
                           int64_t max_rows, cudaStream_t stream);
// GEMM1 with the gated activation in the wgmma kernel's epilogue (no fp32 h, no activation
// kernel), the activation kernel's arithmetic on the same sums. act_rows == nullptr: act.quant
// NONE, GEMM2's bf16 operand into act.out (in the k order act.korder asks); else act.quant ROW (per-token fp8) or NVFP4 (W4A4): the
// activation rows rounded to bf16 into act_rows [rows, N], which launch_activation (act_bf16)
// then quantises. A bf16 activation dtype only. Why a call cannot take it (nullptr: it can).
const char* w4_wgmma_act_refusal(const W4Weights& w, const ActivationParams& act, bool bf16_rows);
void w4_wgmma_gemm1_activation(const W4Weights& w, const void* a, const ActivationParams& act, uint16_t* act_rows,
                               int groups, const int32_t* expert_offsets, int64_t max_rows, cudaStream_t stream);
// (Its launches: fused_gemm1_launches(FusedGemm1::FOUR_BIT), grouped_gemm.hpp.)
// W4A8 at many tokens per expert (w4a8_wgmma.cu): int4 decoded to e4m3 inside an fp8 wgmma
// mainloop, the group scale on each 128-wide partial sum (the numerics of the other two ways).
// a: [rows, k] e4m3 codes (the fp8 operand of the large-batch way).
bool w4a8_wgmma_shape_ok(const W4Weights& w);
void w4a8_wgmma_grouped_gemm(const W4Weights& w, const uint8_t* a, float* d, int groups, const int32_t* expert_offsets,
                             int64_t max_rows, cudaStream_t stream);
// Bytes of decoded weights kept at once by the dequant way (a whole number of experts, >= 1).
constexpr size_t kW4DequantBudget = size_t(512) << 20;

}  // namespace fusedmoe::cuda
