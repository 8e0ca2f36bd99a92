// 4-bit weight grouped GEMMs (design and numerics: w4_gemm.hpp).
//
// mma kernel. A warp owns 16 weight rows (the MMA's M side) and 8 * NT tokens of one expert
// (N side) and walks k in chunks of 128: lane (g = lane / 4, t = lane % 4) reads 16 bytes = 32
// packed values of rows g and g + 8 at k offset chunk * 128 + t * 32 (from the warp's
// shared-memory copy, see kSubs below), and loads 64 bytes = the same 32 activation values of
// token g of every 8-token tile. A k-permutation inside the MMA is free as long as A and B use the same one: each 32-bit
// word of packed weights (values k0..k7) decodes to the pairs (k0,k4) (k1,k5) (k2,k6) (k3,k7)
// with a few shifts and masks, and the activations are permuted the same way: with prmt here for
// MXFP4 / NVFP4, stored in that order for int4 (KOrder::W4_MMA, w4_kperm.cuh: the gather /
// activation kernels write them so; their 16 bytes are the B registers as loaded). Stored so for
// the e2m1 formats too, those layers were 1.00-1.07x slower at 8-128 tokens despite ~6% fewer
// instructions (H100, bench/results/2026-11-26-h100-w4-mma-korder), int4 0.97-0.99x.
// Two k16 MMA steps per word. fp32 accumulators, one warp per output, fixed k order:
// deterministic.
//
// Decoding (values exact, see w4_gemm.hpp):
//   e2m1 -> bf16: sign to bit 15, the three exponent/mantissa bits to bits 8..6; read as bf16 that
//     is the e2m1 value times 2^-126 (code 1 = 0.5 lands on a subnormal, exactly), so one bf16
//     multiply (they keep subnormals) by the block scale x 2^(126 - 10); the fp32 sums x 2^10.
//   int4 -> fp16: (q + 8) | 0x6400 is the fp16 1024 + q + 8; minus 1032 is q (an odd nibble, at bits 4..7 of a
//     half, reads as 1024 + 16 (q + 8): times 1/16 minus 72; int4_fp8.cuh). A 128-wide chunk
//     of k is one scale group of every row, so its MMA sums (of exact products) are multiplied
//     by the group scale in fp32: no fp16 range limit on the scales in this kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "cuda/activation_math.cuh"
#include "cuda/active_expert.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/env_switch.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/smem_opt_in.hpp"
#include "cuda/w4_decode.cuh"
#include "cuda/w4_gemm.hpp"
#include "fusedmoe/error.hpp"

namespace fusedmoe::cuda {
namespace {

using namespace w4;

constexpr int kWarps = 4;

struct Params {
  const uint8_t* w;
  const void* scale;
  const uint16_t* a;
  float* d;
  int64_t n, k;
  int groups;
  const int32_t* offsets;
  bool uint4b8, swizzled;
  float* d2 = nullptr;  // kSplit: the sums of the second half of k (blockIdx.z = 1), [rows, n] as d
};

// The fused instances' second kernel argument (kAct: the activation stage's parameters); the other instances take an
// empty one, so that their Params and code stay as they were.
struct NoAct {};
template <bool kAct>
using ActArg = std::conditional_t<kAct, ActivationParams, NoAct>;

// The scale of row `row` of expert e for the values from k index kk on, in two steps so that
// the load can be issued chunks ahead of its use (converting right after the load would make
// the warp wait for it there): load_scale_raw returns the stored bits (bf16 / e8m0 / e4m3),
// scale_bits converts them to what decode_word and the kernel use: int4 the fp32 bits of the
// bf16 group scale; e2m1 the bf16x2 s2 of decode_word.
template <int F>
__device__ __forceinline__ uint32_t load_scale_raw(const Params& p, int64_t e, int64_t row, int64_t kk) {
  if constexpr (F == kInt4) {
    return static_cast<const uint16_t*>(p.scale)[(e * p.n + row) * (p.k / 128) + kk / 128];
  } else {
    constexpr int kBs = F == kMx ? 32 : 16;
    const int64_t cols = p.k / kBs, b = kk / kBs;
    const uint8_t* s = static_cast<const uint8_t*>(p.scale);
    if (p.swizzled) {
      const int64_t per_expert = ((p.n + 127) / 128 * 128) * ((cols + 3) / 4 * 4);
      return s[e * per_expert + swizzled_offset(row, b, cols)];
    }
    return s[(e * p.n + row) * cols + b];
  }
}

template <int F>
__device__ __forceinline__ uint32_t load_scale(const Params& p, int64_t e, int64_t row, int64_t kk) {
  return scale_bits<F>(load_scale_raw<F>(p, e, row, kk));
}

// Weight streaming: each warp copies its 16 rows into shared memory with cp.async, a stage of
// 256 k values (128 contiguous bytes per row, 16 bytes per lane and copy) at a time, one stage
// ahead of its use. Measured on an H200 before (each lane loading its own 16 bytes per row into
// registers, 64-byte runs per row, 2-3 chunks ahead): the decode GEMMs streamed at 1-2 TB/s,
// bound by the bytes in flight (registers) and the short runs. Stage size (H100 A/B,
// bench/results/2026-11-22-h100-w4-mma-diet): 512 k x 3 stages (52 KB per block) -> 256 k x 3
// 0.91x the layer time, -> 256 k x 2 (19 KB) another 0.97x: less shared memory leaves more L1 to
// the activation rows that every warp of an expert re-reads.
constexpr int kSubs = 2;                           // 128-k sub-chunks per stage (even: the loop below takes two at a time)
constexpr int kStageRowBytes = kSubs * 64;         // bytes of a row per stage
constexpr int kRowPitch = kStageRowBytes + 16;     // +16: the 8 rows g of a fragment read hit distinct banks
constexpr int kStages = 2;
constexpr int kWarpStageBytes = 16 * kRowPitch;
// Scale code -> decode_word's bf16x2 multiplier (e8m0 / e4m3: 256 codes), built once per block:
// converted in the loop, the compares and selects were ~10 instructions per row and sub-chunk.
constexpr int kTableBytes = 256 * 4;
// A block's shared memory: the table and its warps' stage rings of kS stages.
constexpr int smem_bytes(int kS, int kRT = 1) { return kTableBytes + kWarps * kS * kWarpStageBytes * kRT; }
// kSx (the 2-stage tiles, see the kernel): a stage's activations, 8 NT token rows of 256 16-bit values, one copy per
// block after the warps' weight rings.
// A ring of x_buffers(NT) (stage c in buffer c % x_buffers), so that stage c + 1 is copied while stage c is waited for
// without a barrier between: a warp issues stage c + 1 after the block barrier of stage c - 1, which every warp reached
// after computing stage c - 2, so three buffers would do (stage c + 1 into stage c - 2's). The 8- and 16-token tiles
// keep four (a mask, not a modulo; 16 / 32 KB); the 32-token tile takes three (48 KB: 67 KB a block with one row tile
// per warp, 3 blocks per SM as its register form's 168 registers allow - with four, 2; 86 KB and 2 blocks with kRT = 2).
constexpr int kXRowBytes = kSubs * 128 * 2;
constexpr int x_buffers(int NT) { return NT == 4 ? 3 : 4; }
constexpr int x_stage_bytes(int NT) { return 8 * NT * kXRowBytes; }
constexpr int smem_bytes_sx(int kS, int NT, int kRT = 1) { return smem_bytes(kS, kRT) + x_buffers(NT) * x_stage_bytes(NT); }
// The ring buffer of stage c (c >= 0).
template <int NT>
__device__ __forceinline__ uint32_t x_buffer(int c) {
  constexpr uint32_t kN = x_buffers(NT);
  return (kN & (kN - 1)) == 0 ? static_cast<uint32_t>(c) & (kN - 1) : static_cast<uint32_t>(c) % kN;
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

// The kernel is bound by the ALU pipe (ncu, H100, gpt-oss-120b mxfp4 at 8 tokens: 71% of its
// peak, ~44 instructions per packed word, 13.5 of them in the stage issue's 64-bit index math and
// per-byte scale addressing). So everything per lane that does not change along k is computed
// once: 32-bit sizes (w4_shape_ok), a running pointer per copy row pair, scale pointers with a
// fixed byte step per 128-k sub-chunk, activation row pointers clamped to a valid row (columns of
// tokens past the expert's rows are computed and never stored, so they need no zeros).
// kTail (MXFP4's 8-token tile, taken where k % 256 is 1..128: gpt-oss-120b's k = 2880 is 22.5
// sub-chunks): the last stage, of one sub-chunk inside k, runs after the stage loop without the
// second sub-chunk's zeros. H100 (bench/results/2026-11-28-h100-w4-tail): gpt-oss-120b mxfp4 /
// mxfp4-fp8 layers at 8-64 tokens 0.959-0.971x. Its own instance, so that the others keep their
// code (a constant-false form of the change in the shared source moved other instances' register
// counts by up to +60). The extra code takes it from 80 to 96 registers (5 blocks per SM instead of
// 6; held to 6 - 80 registers, a spill - it was 0.996-1.006x). NVFP4 did not gain: at its natural
// 119 registers 0.99-1.01x, held to 5 blocks 1.00-1.02x.
// The last 256-k stage holds one 128-k sub-chunk inside k (the tail instance's case: gpt-oss-120b's k = 2880).
// The kernel spells the same test inline: called there, it made ptxas reschedule the measured tail instance.
constexpr bool half_last_stage(int k) {  // k: 32 bits (w4_shape_ok)
  return k % (kSubs * 128) != 0 && k % (kSubs * 128) <= 128;
}
// 64 bytes of zeros: what the mma kernel's activation loads past k read (a lane's 32 values of a sub-chunk) in the
// instances where that measured faster than predicated loads, whose registers must be zeroed first (8 CS2R per
// sub-chunk and token tile). H200 same-binary A/B (bench/results/2026-11-28-h200-w4-zero-page): MXFP4's 16-token
// tile GEMMs 0.90-0.93x (k loop 1140 -> 1016 instructions, 230 -> 136 registers), W4A8's 8-token tile 0.98x
// (DeepSeek-V3 TP1); but NVFP4's 8- and 16-token tiles 1.02-1.10x and MXFP4's tail instance 1.03-1.06x slower
// with shorter k loops too, and MXFP4's plain 8-token tile went from 80 to 82 registers (6 -> 5 blocks per SM).
__device__ const uint4 kZeroActivations[4] = {};
template <int F, int NT, bool kTail>
constexpr bool kZeroPageLoads = !kTail && ((F == kMx && NT == 2) || (F == kInt4 && NT == 1));
// kZp = false: the predicated loads there too (FUSEDMOE_W4_ZERO_PAGE=0, a same-binary A/B switch; the lean MXFP4
// instances below always take kZeroPageLoads).
// kLean (MXFP4 and NVFP4, w4_mma_lean): the e2m1 decode by mask, multiply, mask (decode_word<F, true>) on an operand stored
// pre-paired (KOrder::W4_MMA, no PRMT per word): the k loop's ALU-pipe instructions - the pipe these GEMMs queue on
// (bench/results/2026-11-28-h200-w4-mma-stalls) - 440 -> 361 per two stages in the 8-token tile, 437 -> 341 in the
// tail instance, 519 -> 359 in the 16-token one. H200 same-binary A/B (bench/results/2026-11-28-h200-w4-lean-decode):
// layers 0.93-0.97x at 8-64 tokens on gpt-oss-120b and DeepSeek-V3 TP1; Qwen3-30B-A3B 0.96 at 8, 0.99 at 64 / 160.
// (Either half alone measured slower on 2026-11-26's kernel.) The 8-token tile is held to 80 registers (6 blocks per
// SM; on its own ptxas took 85 for MXFP4, 96 with a 16-byte spill for NVFP4). NVFP4 the same way since 2026-11-28
// (bench/results/2026-11-28-h200-w4-lean-nvfp4): layers 0.95-1.01x at 8-64 tokens on the three presets; its 16-token
// instance 0.99x at 14-16 rows per expert, 1.01x at 10 (Qwen3 160 tokens); decoding by shifts there (operand still
// pre-paired) was slower at every point (1.006-1.032x).
// NVFP4's kFullK instance (below) at 5 blocks per SM: 88 registers, no spill; held to 6 it spilled 16 bytes in the k
// loop and gained less (bench/results/2026-11-28-h200-w4-full-k r4).
template <int F, int NT, bool kTail, bool kLean, bool kFullK = false>
// W4A8's 8-token tile at 5 (96 registers; with its two MMA chains per group, below, ptxas took 106 on its own: 4 blocks).
// The e2m1 16-token kSx tiles at 4 (one row tile per warp: 52 KB of shared memory, 4 blocks per SM): MXFP4 89, NVFP4 92
// registers, no spill; on its own ptxas took 96 and spilled 8 / 24 bytes. With kRT = 2 (the default where n % 32 == 0)
// 116 / 122 registers under the same bound, 70 KB: 3 blocks.
constexpr int kLeanMinBlocks = F == kNv && kFullK ? 5 : (F != kInt4 && NT == 1 && !kTail && kLean ? 6 : (F == kInt4 && NT == 1 ? 5 : 0));  // 0: no minimum (other instances)
// kAct (w4_mma_gemm1_activation: e2m1 lean 8-token tiles, bf16 activations without quantisation, gated
// activations): a warp's fragment rows g are the gate rows and rows g + 8 the up rows of 8 activation outputs, so each
// lane holds the gate and up sums of one output for two tokens, and the epilogue writes GEMM2's operand with the
// activation stage's arithmetic (activation_math.cuh: dequant factor, fc1 bias, gated activation, rounding, k order)
// instead of h - the same bytes as GEMM1 + launch_activation, one kernel and the h round trip less. Its own instances:
// the row mapping in the shared code cost the other instances 1-10% on 2026-11-22
// (bench/results/2026-11-22-h100-w4-fused-activation-rejected).
// kSplit (w4_mma_split_pays: NVFP4 on one-token grids of few warps, gpt-oss-120b's GEMM2): blockIdx.z = 0 / 1 takes the
// first / second half of the 256-k stages and stores its fp32 sums into p.d / p.d2; the finalize adds the two
// (FinalizeParams::y2). With under a quarter of the resident warps each warp's chain of stages bounds the GEMM; half
// the chain per warp took gpt-oss-120b W4A4's GEMM2 stage from 17.3 to 14.1 us at one token (H200,
// bench/results/2026-11-28-h200-w4-split) - not half: the chain is not all of it. MXFP4 there (its tail instance, k =
// 2880) measured 1.00-1.04x slower split and keeps one k range.
// kSx (the 2-stage 8-token tiles: W4A8's, the e2m1 lean plain and fused-activation ones; smem_x_on): the
// activations travel with the weight stages - each warp copies a quarter of a stage's 8 token rows (tokens 2 warp,
// 2 warp + 1; rows past the expert's not at all) into one block-wide ring of x_buffers(NT) by cp.async, in the stage's commit
// group, and a block barrier per stage (every warp's copies of the stage landed) replaces the warp's: the activations are
// in shared memory a stage ahead, with no registers held for them, where the plain tiles load each sub-chunk's into
// registers one sub-chunk ahead and wait for them (W4A8: the first MMA of a sub-chunk, ncu source counters in
// bench/results/2026-11-29-h200-w4a8-source-stalls; a stage ahead in registers took 126 registers). Chunks of 16 bytes
// (c = 0..31 of a token row, values 8c..8c+7) sit at c ^ (2 ((c >> 3) & 1) ^ (g & 1)): a quarter-warp's LDS.128
// (tokens g, g + 1, lanes t = 0..3) then hits 8 distinct 16-byte bank groups. Same MMAs on the same values in the same
// order as the plain tiles: the same bits.
template <int F, int NT, bool kTail = false, bool kZp = true, bool kLean = false, bool kFullK = false, bool kAct = false,
          bool kSplit = false, int kS = kStages, bool kSx = false, int kRT = 1>
__global__ void __launch_bounds__(kWarps * 32, kS > 2 || (kSx && F != kInt4 && NT == 2) ? 4 : kLeanMinBlocks<F, NT, kTail, kLean, kFullK>)
    w4_mma_kernel(Params p, ActArg<kAct> act) {
  chain_wait();
  static_assert(kRT == 1 || (kRT == 2 && kSx && NT > 1 && F != kInt4), "two row tiles: the e2m1 kSx 16- / 32-token tiles");
  static_assert(!kSx || (kS == 2 && !kFullK && !kSplit && !kTail && (F == kInt4 || kLean)),
                "the shared-memory activations: W4A8's 2-stage tiles, the e2m1 lean ones");
  constexpr int kXStageBytes = x_stage_bytes(NT);
  static_assert(!kTail || (F == kMx && NT == 1), "the tail instance");
  static_assert(!kSplit || (NT == 1 && !kTail && !kAct && !kFullK), "the split instances: plain 8-token tiles");
  static_assert(!kAct || (F != kInt4 && NT == 1 && kLean), "the fused activation: e2m1 lean 8-token tiles");
  extern __shared__ __align__(16) uint8_t smem[];
  const uint32_t* table = reinterpret_cast<const uint32_t*>(smem);
  if constexpr (F != kInt4) {
    for (int i = threadIdx.x; i < 256; i += kWarps * 32)
      reinterpret_cast<uint32_t*>(smem)[i] = scale_bits<F>(static_cast<uint32_t>(i));
  }
  __syncthreads();
  const ExpertRows er = active_expert_rows<kWarps>(p.offsets, p.groups, blockIdx.y);
  const int e = er.e;
  if (e < 0) return;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int n = static_cast<int>(p.n), k = static_cast<int>(p.k), hk = k / 2;
  int n0 = 0;
  bool store_rows = true;  // kSx: false for a warp past n
  // kAct: outputs nb .. nb + 7; their gate rows rb[0] + i * rstride and up rows rb[1] + i * rstride (i < 8).
  int nb = 0, rb[2] = {0, 0}, rstride = 1;
  if constexpr (kAct) {
    nb = (static_cast<int>(blockIdx.x) * kWarps + warp) * 8;
    if constexpr (kSx) {
      if (nb >= act.N) nb = act.N - 8, store_rows = false;  // as n0 below
    } else {
      if (nb >= act.N) return;  // act.N % 8 == 0 (w4_mma_act_refusal)
    }
    int64_t gi, ui;
    gate_up_columns(act, nb, gi, ui);
    rb[0] = static_cast<int>(gi);
    rb[1] = static_cast<int>(ui);
    rstride = act.interleaved ? 2 : 1;
  } else {
    n0 = (static_cast<int>(blockIdx.x) * kWarps + warp) * 16 * kRT;
    if constexpr (kSx) {
      // Every warp copies its quarter of the activations and meets the block barriers: a warp past n computes the
      // last 16 kRT rows again and stores nothing (kRT = 2: n % 32 == 0, rt2_applies).
      if (n0 >= n) n0 = n - 16 * kRT, store_rows = false;
    } else {
      if (n0 >= n) return;  // n % 16 == 0 (w4_shape_ok): the warp's 16 rows all exist
    }
  }
  const int row0 = er.row0, rows = er.row_end - row0;
  const int all_stages = (k + kSubs * 128 - 1) / (kSubs * 128);
  bool half_last = false;  // kTail: the last stage (stage `stages`) has one sub-chunk inside k
  if constexpr (kTail) half_last = k % (kSubs * 128) != 0 && k % (kSubs * 128) <= 128;  // half_last_stage(k)
  const int stages = all_stages - (half_last ? 1 : 0);  // run by the stage loop
  // This block's stages [c_begin, c_end) (kSplit: its half).
  int c_begin = 0, c_end = stages;
  if constexpr (kSplit) {
    const int mid = (stages + 1) / 2;
    if (blockIdx.z == 0) c_end = mid;
    else c_begin = mid;
  }
  uint8_t* wsm = smem + kTableBytes + warp * kS * kWarpStageBytes * kRT;

  // Weight copies of this lane: rows n0 + lane / kCols + kRowsPerCopy * i (i < kCopies), 16 bytes
  // at column lane % kCols of a stage.
  constexpr int kCols = kStageRowBytes / 16, kRowsPerCopy = 32 / kCols, kCopies = 16 / kRowsPerCopy;
  const int cbyte = (lane % kCols) * 16;
  const int64_t rstep = kRowsPerCopy * static_cast<int64_t>(hk) * (kAct ? rstride : 1);
  const uint8_t* wsrc = p.w + (static_cast<int64_t>(e) * n + n0 + lane / kCols) * hk + cbyte;
  // kAct: copies i < kCopies / 2 take gate rows (fragment rows 0..7), the others up rows (8..15).
  static_assert(kCopies % 2 == 0 && kRowsPerCopy * kCopies / 2 == 8, "a copy row step stays inside one half");
  const uint8_t* wsrc_up = nullptr;
  if constexpr (kAct) {
    wsrc = p.w + (static_cast<int64_t>(e) * n + rb[0] + (lane / kCols) * rstride) * hk + cbyte;
    wsrc_up = p.w + (static_cast<int64_t>(e) * n + rb[1] + (lane / kCols) * rstride) * hk + cbyte;
  }
  const uint32_t wdst =
      static_cast<uint32_t>(__cvta_generic_to_shared(wsm)) + (lane / kCols) * kRowPitch + cbyte;

  // Scales of this lane's rows n0 + g (h = 0) and n0 + g + 8 (h = 1): those of 128-k sub-chunk s
  // (values s * 128 + t * 32 .. + 31) at sb[h] + s * sstep: mxfp4 one e8m0 byte, nvfp4 two e4m3
  // bytes (its two 16-blocks), int4 the bf16 group scale.
  const uint8_t* sb[2 * kRT];
  int sstep;
  {
    const uint8_t* s = static_cast<const uint8_t*>(p.scale);
#pragma unroll
    for (int h = 0; h < 2 * kRT; ++h) {
      const int64_t row = kAct ? rb[h & 1] + g * rstride : n0 + h * 8 + g;
      if constexpr (F == kInt4) {
        sb[h] = s + (static_cast<int64_t>(e) * n + row) * (k / 128) * 2;
        sstep = 2;
      } else {
        constexpr int kBs = F == kMx ? 32 : 16;
        const int64_t cols = k / kBs, first = F == kMx ? t : 2 * t;  // this lane's first block
        if (p.swizzled) {
          const int64_t per_expert = ((p.n + 127) / 128 * 128) * ((cols + 3) / 4 * 4);
          sb[h] = s + e * per_expert + swizzled_offset(row, first, cols);
          sstep = F == kMx ? 512 : 1024;  // 4 (8) blocks further: 1 (2) swizzle column tiles on
        } else {
          sb[h] = s + (static_cast<int64_t>(e) * n + row) * cols + first;
          sstep = 128 / kBs;
        }
      }
    }
  }

  static_assert(kSubs % 2 == 0 && kSubs <= 4, "scales of a stage packed below; sub-chunks taken in pairs");
  // The stage's raw scales travel packed: mxfp4 the byte of sub-chunk sub at byte sub of w[h];
  // nvfp4 / int4 its 16 bits at half sub of the 64-bit w[h].
  using RawWord = std::conditional_t<F == kMx, uint32_t, uint64_t>;
  struct Raw {
    RawWord w[2 * kRT];
  };
  // kSx: the block's activation ring and where this lane's 32 values of a sub-chunk lie (token g, values t * 32 + 8 q ..
  // + 7 at xbase + ((q << 4) ^ xswz), plus the buffer's and the sub-chunk's offsets).
  const uint32_t xsm = static_cast<uint32_t>(__cvta_generic_to_shared(smem + smem_bytes(kS, kRT)));
  uint32_t xbase = 0, xswz = 0;  // chunk q of the lane's 64 bytes at xbase + ((q << 4) ^ xswz)
  if constexpr (kSx) {
    xbase = xsm + g * kXRowBytes + t * 64;
    xswz = static_cast<uint32_t>(((t >> 1) << 1) ^ (g & 1)) << 4;
  }
  int x_tok0 = 0;  // kSx: the current 8-token pass (the activation copies' rows)
  // Stage c -> buffer buf (always commits a group; past the last stage it copies nothing).
  auto issue_stage = [&](int c, int buf, Raw& raw) {
    if constexpr (kSx) {  // tokens 2 NT warp + i, 16-byte chunk `lane` of the stage's 256 values; zeros past k
      const int kk = c * (kSubs * 128) + lane * 8;
      const bool xv = kk < k;
#pragma unroll
      for (int i = 0; i < 2 * NT; ++i) {
        // Token rows past the expert's are not copied: their columns of the MMA are computed from whatever the buffer
        // holds and never stored (a column's sums depend on its own token only).
        const int tok = 2 * NT * warp + i;
        if (x_tok0 + tok >= rows) break;
        const uint16_t* src = p.a + static_cast<int64_t>(row0 + x_tok0 + tok) * k + (xv ? kk : 0);
        const uint32_t phys = static_cast<uint32_t>(lane ^ ((((lane >> 3) & 1) << 1) ^ (tok & 1)));
        cp_async16(xsm + x_buffer<NT>(c) * kXStageBytes + tok * kXRowBytes + phys * 16, src, xv);
      }
    }
    const int byte = c * kStageRowBytes;
    const bool kv = byte + cbyte < hk;  // this lane's 16 bytes lie inside the rows (so c < stages)
    const uint32_t dst = wdst + buf * kWarpStageBytes * kRT;
    if constexpr (kAct) {
      const uint8_t* src[2] = {wsrc + (kv ? byte : 0), wsrc_up + (kv ? byte : 0)};
#pragma unroll
      for (int i = 0; i < kCopies; ++i) {
        cp_async16(dst + i * kRowsPerCopy * kRowPitch, src[i / (kCopies / 2)], kv);
        src[i / (kCopies / 2)] += rstep;
      }
    } else {
      const uint8_t* src = wsrc + (kv ? byte : 0);
#pragma unroll
      for (int i = 0; i < kCopies * kRT; ++i) {  // kRT = 2: rows 16..31 continue the same step
        cp_async16(dst + i * kRowsPerCopy * kRowPitch, src, kv);
        src += rstep;
      }
    }
    cp_async_commit();
#pragma unroll
    for (int h = 0; h < 2 * kRT; ++h) {
      const uint8_t* q = sb[h] + static_cast<int64_t>(c) * kSubs * sstep;
      RawWord r = 0;
#pragma unroll
      for (int sub = 0; sub < kSubs; ++sub) {
        const bool ok = (c * kSubs + sub) * 128 + t * 32 < k;
        if constexpr (F == kMx) {
          const uint32_t v = ok ? __ldg(q + sub * sstep) : 0u;
          r |= v << (8 * sub);
        } else {
          const uint32_t v = ok ? __ldg(reinterpret_cast<const uint16_t*>(q + sub * sstep)) : 0u;
          r |= static_cast<uint64_t>(v) << (16 * sub);
        }
      }
      raw.w[h] = r;
    }
  };

  for (int tok0 = 0; tok0 < rows; tok0 += 8 * NT) {
    const uint16_t* xrow[NT];  // token g of tile j (clamped to the last row), at this lane's k offset
#pragma unroll
    for (int j = 0; j < NT; ++j)
      xrow[j] = p.a + static_cast<int64_t>(row0 + min(tok0 + j * 8 + g, rows - 1)) * k + t * 32;
    // Activations of sub-chunk kc (zeros past k, where the weights are zero-filled too). kZeroPageLoads: past k
    // the loads read kZeroActivations instead of being predicated off - a predicated load needs its registers
    // zeroed first (8 CS2R per sub-chunk and token tile).
    auto load_x = [&](int kc, uint4 (&xv)[NT][4]) {
      if constexpr (kFullK) {
        // k % 256 == 0: every sub-chunk below k / 128 lies inside k for every lane; the one past k (the prefetch
        // after the last sub-chunk) is never used: not loaded, its registers left as they are (no zeroing).
        if (kc * 128 < k) {
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            const uint4* src = reinterpret_cast<const uint4*>(xrow[j] + kc * 128);
#pragma unroll
            for (int q = 0; q < 4; ++q) xv[j][q] = __ldg(src + q);
          }
        }
        return;
      }
      const bool kv = kc * 128 + t * 32 < k;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        if constexpr (kZp && kZeroPageLoads<F, NT, kTail>) {
          const uint4* src = kv ? reinterpret_cast<const uint4*>(xrow[j] + kc * 128) : kZeroActivations;
#pragma unroll
          for (int q = 0; q < 4; ++q) xv[j][q] = __ldg(src + q);
        } else {
          const uint4* src = reinterpret_cast<const uint4*>(xrow[j] + kc * 128);
#pragma unroll
          for (int q = 0; q < 4; ++q) xv[j][q] = kv ? __ldg(src + q) : make_uint4(0, 0, 0, 0);
        }
      }
    };
    float acc[kRT][NT][4];  // row tile r: weight rows n0 + 16 r ..
#pragma unroll
    for (int r = 0; r < kRT; ++r)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[r][j][q] = 0.0f;

    // One sub-chunk: its scales, weights from shared memory, the next sub-chunk's activations
    // into the other buffer (two named buffers, the sub loop unrolled by 2: no copies).
    auto body = [&](int c, int sub, const Raw& raw, const uint8_t* buf, uint4 (&xa)[NT][4], uint4 (&xn)[NT][4],
                    bool prefetch) {
      if (prefetch) load_x(c * kSubs + sub + 1, xn);
      if constexpr (kSx) {  // this sub-chunk's activations from the block's ring (stage c in buffer x_buffer<NT>(c))
        const uint32_t off = x_buffer<NT>(c) * kXStageBytes + sub * 256;
#pragma unroll
        for (int j = 0; j < NT; ++j)  // token j * 8 + g: the same parity as g, the same swizzle
#pragma unroll
          for (int q = 0; q < 4; ++q)
            asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(xa[j][q].x), "=r"(xa[j][q].y), "=r"(xa[j][q].z), "=r"(xa[j][q].w)
                         : "r"(xbase + off + j * 8 * kXRowBytes + ((static_cast<uint32_t>(q) << 4) ^ xswz)));
      }
      uint4 wv[2 * kRT];
#pragma unroll
      for (int h = 0; h < 2 * kRT; ++h)
        wv[h] = *reinterpret_cast<const uint4*>(buf + (h * 8 + g) * kRowPitch + sub * 64 + t * 16);
      // W4A8's 8-token tile: the group's sums in two sets, the word's two k16 MMAs into different ones (two dependent
      // chains of four MMAs instead of one of eight: that tile waits on memory and on fixed-latency results, not the
      // ALU; bench/results/2026-11-29-h200-w4a8-two-chains). The 16- / 32-token tiles use part[0] only (with both,
      // the 16-token one went 136 -> 229 registers); e2m1 formats sum into acc (two sets there measured slower:
      // bench/results/2026-11-29-h200-e2m1-two-acc).
      float part[2][NT][4];
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int q = 0; q < 4; ++q) part[i][j][q] = 0.0f;
      uint32_t s2[2 * kRT][2];  // rows g, g + 8 (of each row tile); nvfp4: its two 16-blocks
#pragma unroll
      for (int h = 0; h < 2 * kRT; ++h) {
        if constexpr (F == kMx) {
          s2[h][0] = s2[h][1] = table[(raw.w[h] >> (8 * sub)) & 0xFFu];
        } else if constexpr (F == kNv) {
          const uint32_t bits = static_cast<uint32_t>(raw.w[h] >> (16 * sub));
          s2[h][0] = table[bits & 0xFFu];
          s2[h][1] = table[(bits >> 8) & 0xFFu];
        } else {
          s2[h][0] = s2[h][1] = static_cast<uint32_t>(raw.w[h] >> (16 * sub)) << 16;  // fp32 bits of the bf16
        }
      }
#pragma unroll
      for (int q = 0; q < 4; ++q) {  // word q: values kb + 8q .. kb + 8q + 7
        uint32_t pa[2 * kRT][4];
#pragma unroll
        for (int h = 0; h < 2 * kRT; ++h) {
          const uint32_t word = q == 0 ? wv[h].x : q == 1 ? wv[h].y : q == 2 ? wv[h].z : wv[h].w;
          decode_word<F, kLean>(word, s2[h][q >> 1], p.uint4b8, pa[h]);
        }
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          const uint4 x = xa[j][q];
          uint32_t b[4];  // (k0,k4) (k1,k5) | (k2,k6) (k3,k7)
          if constexpr (F == kInt4 || kLean) b[0] = x.x, b[1] = x.y, b[2] = x.z, b[3] = x.w;  // stored so
          else permute_b(x, b);
#pragma unroll
          for (int r = 0; r < kRT; ++r) {  // each row tile on the same activation fragment
            const uint32_t a0[4] = {pa[2 * r][0], pa[2 * r + 1][0], pa[2 * r][1], pa[2 * r + 1][1]};
            const uint32_t a1[4] = {pa[2 * r][2], pa[2 * r + 1][2], pa[2 * r][3], pa[2 * r + 1][3]};
            float (&dst)[4] = F == kInt4 ? part[0][j] : acc[r][j];
            float (&dst2)[4] = F == kInt4 && NT == 1 ? part[1][j] : dst;
            mma16816<F>(dst, a0, b[0], b[1]);
            mma16816<F>(dst2, a1, b[2], b[3]);
          }
        }
      }
      if constexpr (F == kInt4) {  // one 128-wide scale group of every row: scale its sums once
        const float s_lo = __uint_as_float(s2[0][0]), s_hi = __uint_as_float(s2[1][0]);
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int i = 0; i < (NT == 1 ? 2 : 1); ++i) {
            acc[0][j][0] = fmaf(part[i][j][0], s_lo, acc[0][j][0]);
            acc[0][j][1] = fmaf(part[i][j][1], s_lo, acc[0][j][1]);
            acc[0][j][2] = fmaf(part[i][j][2], s_hi, acc[0][j][2]);
            acc[0][j][3] = fmaf(part[i][j][3], s_hi, acc[0][j][3]);
          }
      }
    };

    Raw sring[kS];
    if constexpr (kSx) {
      x_tok0 = tok0;
      __syncthreads();  // every warp is done with the ring's buffers of the pass before
    }
#pragma unroll
    for (int d = 0; d < kS - 1; ++d) issue_stage(c_begin + d, d, sring[d]);
    uint4 xa[NT][4], xb[NT][4];
    if constexpr (!kSx) load_x(c_begin * kSubs, xa);
    for (int c0 = c_begin; c0 < c_end; c0 += kS) {
#pragma unroll
      for (int u = 0; u < kS; ++u) {
        const int c = c0 + u;  // (c - c_begin) % kS == u
        if (c >= c_end) break;
        issue_stage(c + kS - 1, (u + kS - 1) % kS, sring[(u + kS - 1) % kS]);
        cp_async_wait<kS - 1>();  // stage c has landed (this lane's copies)
        if constexpr (kSx) __syncthreads();  // ... and every lane's of the block (its activation quarters)
        else __syncwarp();                   // ... and every lane's
        const uint8_t* buf = wsm + u * kWarpStageBytes * kRT;
        if constexpr (kSx) {
          static_assert(kSubs == 2, "a stage's two sub-chunks");
          body(c, 0, sring[u], buf, xa, xb, false);
          body(c, 1, sring[u], buf, xa, xb, false);
        } else {
#pragma unroll 1
          for (int sub = 0; sub < kSubs; sub += 2) {  // not unrolled further: registers (at 4 sub-chunks: 255 + spills)
            body(c, sub, sring[u], buf, xa, xb, true);
            body(c, sub + 1, sring[u], buf, xb, xa, true);
          }
        }
        __syncwarp();  // the buffer is refilled by a later issue_stage
      }
    }
    if constexpr (kTail) {
      if (half_last) {  // stage `stages` (issued by the loop's last step; its activations in xa)
        const int u = kS == 2 ? stages & 1 : stages % kS;
        cp_async_wait<0>();
        __syncwarp();
        Raw r;  // selected by value (a reference to a runtime-chosen element put sring in local memory)
        if constexpr (kS == 2) {
#pragma unroll
          for (int h = 0; h < 2 * kRT; ++h) r.w[h] = u ? sring[1].w[h] : sring[0].w[h];
        } else {
          r = sring[0];
#pragma unroll
          for (int i = 1; i < kS; ++i)
            if (u == i) r = sring[i];
        }
        body(stages, 0, r, wsm + u * kWarpStageBytes * kRT, xa, xb, true);
      }
    }
    cp_async_wait<0>();
    __syncwarp();
    // C fragment: (weight row g / g + 8, tokens 2t / 2t + 1).
    constexpr float kOut = F == kInt4 ? 1.0f : static_cast<float>(1 << kE2m1Shift);
    if constexpr (kAct) {  // gate (q = 0, 1) and up (q = 2, 3) of output nb + g for tokens 2t, 2t + 1
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const int tok = tok0 + 2 * t + q;
        if (tok >= rows || (kSx && !store_rows)) continue;
        const int64_t r = row0 + tok;
        // This lane's output and its gate / up columns, recomputed here rather than held through the k loop (at 80
        // registers, held, they spilled).
        const int out = (static_cast<int>(blockIdx.x) * kWarps + (static_cast<int>(threadIdx.x) >> 5)) * 8 + g;
        int64_t gi, ui;
        gate_up_columns(act, out, gi, ui);
        // launch_activation's act_value on h = acc * kOut: the same operations, the same bits.
        const float ds = row_factor(act, r, e, 1.0f);  // no TENSOR dequant here (w4_mma_act_refusal)
        const float gv = fix_h(act, acc[0][0][q] * kOut, ds, r, e, gi);
        const float uv = fix_h(act, acc[0][0][q + 2] * kOut, ds, r, e, ui);
        store_operand(act.out, act.op, r * act.N + out, round_to(act.act_dtype, gated(act, gv, uv)), act.korder);
      }
    } else {
#pragma unroll
      for (int r = 0; r < kRT; ++r)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const int col = n0 + 16 * r + g + (q >= 2 ? 8 : 0);
            const int tok = tok0 + j * 8 + 2 * t + (q & 1);
            float* const d = kSplit && blockIdx.z != 0 ? p.d2 : p.d;
            if (tok < rows && (!kSx || store_rows)) d[static_cast<int64_t>(row0 + tok) * n + col] = acc[r][j][q] * kOut;
          }
    }
  }
}

// One thread per packed word (8 values) of the experts [e0, e0 + count) that have rows (MXFP4 /
// NVFP4; W4A8's large batches run w4a8_wgmma.cu).
template <int F>
__global__ void w4_dequant_kernel(Params p, int e0, int count, uint16_t* out) {
  chain_wait();
  static_assert(F != kInt4, "e2m1 formats only");
  const int64_t words_per_row = p.k / 8, words_per_expert = p.n * words_per_row;
  const int64_t total = static_cast<int64_t>(count) * words_per_expert;
  for (int64_t it = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; it < total;
       it += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t el = it / words_per_expert, e = e0 + el;
    if (p.offsets[e + 1] == p.offsets[e]) continue;
    const int64_t rem = it - el * words_per_expert, row = rem / words_per_row, kk = (rem - row * words_per_row) * 8;
    const uint32_t word = __ldg(reinterpret_cast<const uint32_t*>(p.w + (e * p.n + row) * (p.k / 2) + kk / 2));
    uint32_t pr[4];
    const uint32_t sc = load_scale<F>(p, e, row, kk);
    decode_word<F>(word, sc, p.uint4b8, pr);
    // The full weight: x 2^kE2m1Shift undoes decode_word's shift.
    uint32_t m2 = static_cast<uint32_t>(127 + kE2m1Shift) << 7;
    m2 |= m2 << 16;
#pragma unroll
    for (int i = 0; i < 4; ++i) pr[i] = bf16x2_mul(pr[i], m2);
    const uint4 v = make_uint4(prmt(pr[0], pr[1], 0x5410), prmt(pr[2], pr[3], 0x5410), prmt(pr[0], pr[1], 0x7632),
                               prmt(pr[2], pr[3], 0x7632));
    *reinterpret_cast<uint4*>(out + (el * p.n + row) * p.k + kk) = v;
  }
}

Params make_params(const W4Weights& w, const void* a, float* d, int groups, const int32_t* offsets) {
  Params p;
  p.w = w.w;
  p.scale = w.scale;
  p.a = static_cast<const uint16_t*>(a);
  p.d = d;
  p.n = w.n;
  p.k = w.k;
  p.groups = groups;
  p.offsets = offsets;
  p.uint4b8 = w.uint4b8;
  p.swizzled = w.swizzled;
  return p;
}

bool zero_page_on() {
  static const bool on = !env_switch_is_zero("FUSEDMOE_W4_ZERO_PAGE");
  return on;
}
// kFullK (the e2m1 lean 8-token tile, k % 256 == 0 and k >= kFullKMinK): the activation loads without the zeroed
// registers of the predicated form (the one sub-chunk past k, the last prefetch, is not loaded at all) - the k loop
// 873 -> 770 instructions per two stages (MXFP4), 911 -> 806 (NVFP4, at 5 blocks per SM). Measured on an H200
// (bench/results/2026-11-28-h200-w4-full-k): at k = 7168 (DeepSeek-V3 TP1 GEMM1) MXFP4 0.96x at 8 tokens in three
// runs (0.95-1.00 at 64), NVFP4 0.97-0.98x; at k = 2048 mixed (DeepSeek-V3 GEMM2 0.98 / 0.99, Qwen3-30B-A3B GEMM1
// 1.018 / 1.006 for MXFP4; NVFP4 on Qwen3 1.02-1.05x), hence long k only.
constexpr int64_t kFullKMinK = 4096;
bool full_k_on() {
  static const bool on = !env_switch_is_zero("FUSEDMOE_W4_FULLK");
  return on;
}
// Whether an e2m1 lean 8-token call of this k takes the kFullK instance (or, with kSx, that instance's 3-stage form).
bool full_k_case(int64_t k) { return k % (kSubs * 128) == 0 && k >= kFullKMinK && full_k_on(); }
// Grids under one wave (8-token instances; one-token layers of DeepSeek-V3 TP1, two and three tokens of
// Qwen3-30B-A3B, two tokens of gpt-oss-120b). Launched with PDL, such a GEMM's blocks start while the kernel before
// it still runs and are placed on the SMs that have room then - presumably unevenly (the placement itself was not
// observed), which costs an under-one-wave GEMM the time of its fullest SM. Measured on an H200
// (bench/results/2026-11-28-h200-w4-few-stages): the DeepSeek-V3 TP1 one-token GEMM1 launched without PDL made the
// layer 0.93x as long although the GEMM alone, timed apart, did not change. So:
// - grids of at most kNoPdlWarpsPerSm warps per SM (one wave of the 8-token instances: 6 blocks of 4 warps) are
//   launched plainly (no programmatic serialisation; chain_wait() then returns at once) - FUSEDMOE_W4_FEW_NOPDL=0 off;
// - of those, grids of at most kFewWarpsPerSm warps per SM with k >= kFewStagesMinK stream 3 weight stages per warp
//   instead of 2 (kS = 3: two stages in flight while one is decoded; ~120 registers, so 4 blocks = 16 warps per SM
//   at most) - FUSEDMOE_W4_FEW_STAGES=0 off. DeepSeek-V3 TP1 one token: 0.90-0.94x with both against 0.93 without
//   PDL alone; at shorter k (Qwen3-30B-A3B, gpt-oss-120b) 3 stages measured 0.97-1.02x and are not taken.
// Same instructions on the same data in the same order either way: the same bits.
constexpr int64_t kNoPdlWarpsPerSm = 24, kFewWarpsPerSm = 16, kFewStagesMinK = 4096;
int g_forced_stages = 0;  // w4_mma_force_stages (tests): 0 = the rule above
bool few_nopdl_on() {
  static const bool on = !env_switch_is_zero("FUSEDMOE_W4_FEW_NOPDL");
  return on;
}
bool few_stages_on() {
  static const bool on = !env_switch_is_zero("FUSEDMOE_W4_FEW_STAGES");
  return on;
}
// The caller's SM count (the backend's, read once), or the current device's where a caller gives none (tests).
int sms_or_device(int sm_count) {
  if (sm_count > 0) return sm_count;
  int dev = 0, sms = 0;
  FUSEDMOE_CUDA_CHECK(cudaGetDevice(&dev));
  FUSEDMOE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}
W4MmaLaunch g_last_launch;  // w4_mma_last_launch (tests)
template <int F, int NT, bool kTail, bool kZp, bool kLean, bool kFullK, bool kAct, bool kSplit, int kS, bool kSx = false,
          int kRT = 1>
void launch_staged(const Params& p, dim3 grid, cudaStream_t stream, const ActArg<kAct>& act, bool pdl) {
  constexpr int kBytes = kSx ? smem_bytes_sx(kS, NT, kRT) : smem_bytes(kS);
  constexpr auto kernel = w4_mma_kernel<F, NT, kTail, kZp, kLean, kFullK, kAct, kSplit, kS, kSx, kRT>;
  opt_in_dynamic_smem<kernel>(kBytes);
  g_last_launch = {NT, kS, kSx, kRT};
  if constexpr (kRT != 1) grid.x = static_cast<unsigned>((p.n + kWarps * 16 * kRT - 1) / (kWarps * 16 * kRT));
  if (pdl) launch_chained(kernel, grid, dim3(kWarps * 32), kBytes, stream, p, act);
  else launch_unchained(kernel, grid, dim3(kWarps * 32), kBytes, stream, p, act);
}
// kRT = 2 (the e2m1 kSx 16- / 32-token tiles, n % 32 == 0): each warp takes two 16-row weight tiles on the same
// activation fragments, so the activations read from shared memory per weight byte halve - the L1/TEX pipe holds
// these tiles (bench/results/2026-11-29-h200-w4-midbatch-ncu: 77-80% busy, DRAM 31-33%). 116-143 registers, no spill;
// 3 / 2 blocks per SM (16- / 32-token; shared memory). H200 same-binary A/B (bench/results/2026-11-29-h200-w4-rt2):
// layers at 10-24 rows per expert 0.93-0.97x on Qwen3-30B-A3B, 0.85-0.96x on DeepSeek-V3 TP1, 0.94-0.99x on
// gpt-oss-120b. Same MMAs per output in the same order: the same bits. FUSEDMOE_W4_RT2=0: one row tile per warp.
bool rt2_applies(const Params& p) {
  static const bool on = !env_switch_is_zero("FUSEDMOE_W4_RT2");
  return on && p.n % 32 == 0;
}
// One instance: its shared-memory opt-in (once per device) and the launch (chained unless the grid is under a wave).
template <int F, int NT, bool kTail, bool kZp, bool kLean, bool kFullK = false, bool kAct = false, bool kSplit = false,
          bool kSx = false>
void launch_instance(const Params& p, dim3 grid, cudaStream_t stream, int sms, const ActArg<kAct>& act = {}) {
  if constexpr (kSplit) grid.z = 2;
  if constexpr (NT == 1) {
    const int64_t warps = static_cast<int64_t>(grid.x) * grid.y * grid.z * kWarps;
    const bool under_wave = warps <= kNoPdlWarpsPerSm * sms;
    const bool three = g_forced_stages == 3 || (g_forced_stages == 0 && few_stages_on() &&
                                                warps <= kFewWarpsPerSm * sms && p.k >= kFewStagesMinK);
    const bool pdl = !(under_wave && few_nopdl_on());
    if constexpr (kSx) {  // the 3-stage grids keep the register form (kSx has two stages)
      if (!three) return launch_staged<F, NT, kTail, kZp, kLean, false, kAct, kSplit, kStages, true>(p, grid, stream, act, pdl);
    }
    if (three) return launch_staged<F, NT, kTail, kZp, kLean, kFullK, kAct, kSplit, 3>(p, grid, stream, act, pdl);
    return launch_staged<F, NT, kTail, kZp, kLean, kFullK, kAct, kSplit, kStages>(p, grid, stream, act, pdl);
  } else {
    if constexpr (kSx && F != kInt4) {
      if (rt2_applies(p)) return launch_staged<F, NT, kTail, kZp, kLean, kFullK, kAct, kSplit, kStages, true, 2>(p, grid, stream, act, true);
    }
    launch_staged<F, NT, kTail, kZp, kLean, kFullK, kAct, kSplit, kStages, kSx>(p, grid, stream, act, true);
  }
}
// The 2-stage tiles with their activations in shared memory (kSx): W4A8's 8-, 16- and 32-token ones; the e2m1 lean 16-
// and 32-token ones; the e2m1 lean plain / fused-activation 8-token ones at k <= kSxE2m1MaxK (not MXFP4's tail
// instance). The e2m1 16-token tile at 9-15 rows per expert (2026-11-29, fourth session; bench/results/
// 2026-11-29-h200-e2m1-smem-x16 r1 / r2): layers 0.69-0.76x on Qwen3-30B-A3B (k = 2048 / 768), 0.70-0.81x on DeepSeek-V3
// TP1 (7168 / 2048) and 0.69-0.81x on gpt-oss-120b (2880) - at every k, unlike the 8-token tile. W4A8's 16-token tile (9-15 expected rows
// per expert; 128 registers instead of 136, 4 blocks per SM instead of 3): layers 0.66-0.67x at Qwen3-30B-A3B 160-224
// tokens and DeepSeek-V3 TP1 320 / 384 (bench/results/2026-11-29-h200-w4-smem-x r6). H200 same-binary A/B (bench/results/2026-11-29-h200-w4-smem-x):
// W4A8 GEMMs 0.81-0.98 at 8-64 tokens (Qwen3-30B-A3B k = 768 / 2048, DeepSeek-V3 TP1 2048 / 7168); e2m1 GEMMs at
// k = 768 / 2048 0.89-0.99, but at k = 2880 (gpt-oss-120b; NVFP4 plain, MXFP4 tail) 1.00-1.06 and at 7168 (DeepSeek-V3
// TP1 GEMM1, in place of kFullK) 1.04-1.05 - those keep the register form. FUSEDMOE_W4_SMEM_X=0: never. Tests force
// either form (w4_mma_force_smem_x; forced, the k limit does not apply).
constexpr int64_t kSxE2m1MaxK = 2048;
int g_forced_sx = 0;  // 0: the rule, 1: never, 2: wherever an instance exists
// FUSEDMOE_W4_SMEM_X=0: never; =2: at every k (an A/B of the k rule); unset or 1: the rule.
int smem_x_env() {
  static const int mode = [] {
    const char* e = std::getenv("FUSEDMOE_W4_SMEM_X");
    if (e == nullptr) return 1;
    for (int m : {0, 1, 2})
      if (std::strcmp(e, std::to_string(m).c_str()) == 0) return m;
    throw Error(std::string("FUSEDMOE_W4_SMEM_X: expected 0, 1 or 2, got '") + e + "'");
  }();
  return mode;
}
template <int F, int NT>
bool smem_x_on(const Params& p) {
  if (g_forced_sx != 0) return g_forced_sx == 2;
  const int mode = smem_x_env();
  return mode == 2 || (mode == 1 && (F == kInt4 || NT > 1 || p.k <= kSxE2m1MaxK));
}
template <int F, int NT, bool kTail = false, bool kLean = false>
void launch_one(const Params& p, dim3 grid, cudaStream_t stream, int sms) {
  constexpr bool kZp = kZeroPageLoads<F, NT, kTail>;
  if constexpr (kLean) {
    if constexpr (F != kInt4 && NT == 1 && !kTail) {
      // kSx (forced at kFullK's k in tests: the kFullK flag then still picks the 3-stage instance where
      // launch_instance takes one).
      const bool full_k = full_k_case(p.k);
      if (smem_x_on<F, NT>(p)) {
        if (full_k) return launch_instance<F, NT, false, false, true, true, false, false, true>(p, grid, stream, sms);
        return launch_instance<F, NT, false, kZp, true, false, false, false, true>(p, grid, stream, sms);
      }
      if (full_k) return launch_instance<F, NT, false, false, true, true>(p, grid, stream, sms);
    }
    if constexpr (F != kInt4 && NT > 1) {  // the e2m1 lean 16- and 32-token tiles
      if (smem_x_on<F, NT>(p)) return launch_instance<F, NT, false, kZp, true, false, false, false, true>(p, grid, stream, sms);
    }
    return launch_instance<F, NT, kTail, kZp, true>(p, grid, stream, sms);
  }
  if constexpr (kZp) {
    if (!zero_page_on()) return launch_instance<F, NT, kTail, false, false>(p, grid, stream, sms);
  }
  if constexpr (F == kInt4) {  // every W4A8 tile (8, 16, 32 tokens)
    if (smem_x_on<F, NT>(p)) return launch_instance<F, NT, false, kZp, false, false, false, false, true>(p, grid, stream, sms);
  }
  launch_instance<F, NT, kTail, true, false>(p, grid, stream, sms);
}

// FUSEDMOE_W4_TAIL=0: the tail instance off (same-binary A/B).
bool tail_on() {
  static const bool on = !env_switch_is_zero("FUSEDMOE_W4_TAIL");
  return on;
}

// Which w4_mma_kernel instance a call runs (template flags <F, NT, kTail, kZp, kLean, kFullK, kAct>; every switch at its
// default):
//   W4A8 (kInt4)    NT = 1 / 2 / 4; kZp (zero-page loads past k) at NT = 1.
//   (kSx, the activations through shared memory: smem_x_on.)
//   MXFP4 / NVFP4   kLean (mask-multiply decode, operand pre-paired), NT = 1 / 2 / 4; at NT = 1:
//                   MXFP4 with k % 256 in 1..128 the tail instance (kTail: the last half stage by itself),
//                   k % 256 == 0 and k >= 4096 kFullK, otherwise the plain one; MXFP4's NT = 2 with kZp.
//   GEMM1 + activation (w4_mma_gemm1_activation, kAct): MXFP4 / NVFP4 NT = 1 lean, kFullK or plain as above (MXFP4's
//                   tail case is refused: w4_mma_act_refusal).
// The switches FUSEDMOE_W4_LEAN(_NV) / _TAIL / _ZERO_PAGE / _FULLK / _MMA_ACT = 0 pick the instances they replaced.
template <int F>
void launch_mma(const Params& p, int nt, dim3 grid, cudaStream_t stream, int sms) {
  if constexpr (F != kInt4) {
    if (w4_mma_lean(F == kMx ? Format::MXFP4 : Format::NVFP4)) {  // operand stored pre-paired (cuda_backend.cpp w4_korder)
      if (p.d2 != nullptr) {  // k split in two (w4_mma_split_pays: NVFP4, nt == 1): the plain 8-token tile
        if constexpr (F == kNv) return launch_instance<F, 1, false, false, true, false, false, true>(p, grid, stream, sms);
        else throw Error("w4 mma GEMM: the k split is NVFP4's");
      }
      if constexpr (F == kMx) {
        if (nt == 1 && half_last_stage(static_cast<int>(p.k)) && tail_on()) return launch_one<F, 1, true, true>(p, grid, stream, sms);
      }
      if (nt == 1) return launch_one<F, 1, false, true>(p, grid, stream, sms);
      if (nt == 2) return launch_one<F, 2, false, true>(p, grid, stream, sms);
      return launch_one<F, 4, false, true>(p, grid, stream, sms);
    }
  }
  if constexpr (F == kMx) {
    if (nt == 1 && half_last_stage(static_cast<int>(p.k)) && tail_on()) return launch_one<F, 1, true>(p, grid, stream, sms);
  }
  if (nt == 1) launch_one<F, 1>(p, grid, stream, sms);
  else if (nt == 2) launch_one<F, 2>(p, grid, stream, sms);
  else launch_one<F, 4>(p, grid, stream, sms);
}

// GEMM1 + activation (kAct): the instance launch_mma would pick for this k (kFullK or plain; both lean, kZp false as
// there). MXFP4's tail case is refused (w4_mma_act_refusal).
bool mma_act_on() {
  static const bool on = !env_switch_is_zero("FUSEDMOE_W4_MMA_ACT");
  return on;
}
template <int F>
void launch_mma_act(const Params& p, const ActivationParams& act, dim3 grid, cudaStream_t stream, int sms) {
  const bool full_k = full_k_case(p.k);
  if (smem_x_on<F, 1>(p)) {
    if (full_k) return launch_instance<F, 1, false, false, true, true, true, false, true>(p, grid, stream, sms, act);
    return launch_instance<F, 1, false, false, true, false, true, false, true>(p, grid, stream, sms, act);
  }
  if (full_k) return launch_instance<F, 1, false, false, true, true, true>(p, grid, stream, sms, act);
  launch_instance<F, 1, false, false, true, false, true>(p, grid, stream, sms, act);
}

// Tokens per pass of the mma kernel by the expected rows per active expert: 8-token tiles up to kTile8MaxRows, 16-token
// tiles up to kTile16MaxRows, 32-token tiles above. An expert with more rows than its tile takes another pass over its
// weights (from HBM again: a pass streams more than L2 holds), a bigger tile more MMA and decode work per weight byte.
// With the tiles' activations through shared memory (kSx) the bigger tiles got cheaper, and H200 same-binary A/Bs
// (bench/results/2026-11-29-h200-w4-tile-rows, layers on three presets, W4A8 / MXFP4 / NVFP4) moved the bounds from
// 8 / 16: the 16-token tile at 7 / 8 rows 0.85-0.95x / 0.78-0.90x the 8-token one (about a third of the experts had
// more than 8 rows), at 6 rows mixed (0.95-1.07), at 4 / 5 rows 1.04-1.17x; the 32-token tile at 16 rows 0.86-1.00x
// the 16-token one, at 13 rows 1.07-1.21x. FUSEDMOE_W4_TILE_ROWS=A/B (a same-binary A/B switch) sets the two bounds.
constexpr int64_t kTile8MaxRows = 6, kTile16MaxRows = 15;
struct TileRows {
  int64_t t8 = kTile8MaxRows, t16 = kTile16MaxRows;
};
TileRows tile_rows() {
  static const TileRows r = [] {
    TileRows t;
    const char* e = std::getenv("FUSEDMOE_W4_TILE_ROWS");
    if (e == nullptr) return t;
    long a = 0, b = 0;
    char tail = 0;
    if (std::sscanf(e, "%ld/%ld%c", &a, &b, &tail) != 2 || a < 1 || b < a)
      throw Error(std::string("FUSEDMOE_W4_TILE_ROWS: expected A/B with 1 <= A <= B, got '") + e + "'");
    t.t8 = a;
    t.t16 = b;
    return t;
  }();
  return r;
}
int tokens_per_pass(int64_t max_rows, int groups) {
  const int64_t active = std::min<int64_t>(max_rows, groups);
  const int64_t expect = (max_rows + active - 1) / active;
  const TileRows r = tile_rows();
  return expect <= r.t8 ? 8 : (expect <= r.t16 ? 16 : 32);
}

}  // namespace

void w4_mma_force_smem_x(int mode) {
  if (mode < 0 || mode > 2) throw Error("w4_mma_force_smem_x: mode must be 0, 1 or 2, got " + std::to_string(mode));
  g_forced_sx = mode;
}

W4MmaLaunch w4_mma_last_launch() { return g_last_launch; }

void w4_mma_force_stages(int stages) {
  if (stages != 0 && stages != 2 && stages != 3)
    throw Error("w4_mma_force_stages: stages must be 0, 2 or 3, got " + std::to_string(stages));
  g_forced_stages = stages;
}

const char* w4_mma_act_refusal(const W4Weights& w13, const ActivationParams& act, int groups, int64_t max_rows) {
  if (!mma_act_on()) return "switched off (FUSEDMOE_W4_MMA_ACT=0)";
  if (w13.format != Format::MXFP4 && w13.format != Format::NVFP4) return "e2m1 weights only";
  if (!w4_mma_lean(w13.format)) return "the lean decode is switched off";
  if (max_rows <= 0 || groups <= 0 || tokens_per_pass(max_rows, groups) != 8)
    return "more expected rows per expert than the 8-token tile takes";
  if (act.quant != Fp8Quant::NONE || act.op != Operand::BF16) return "GEMM2's operand is not unquantised bf16";
  if (act.act == Activation::RELU2 || act.R != 2 * act.N || w13.n != act.R) return "not a gated activation of GEMM1's rows";
  if (act.N % 8 != 0) return "the intermediate size is not a multiple of 8";
  if (act.dq.kind != Dequant::NONE && act.dq.kind != Dequant::GENERIC) return "a dequant the epilogue does not take";
  // Where MXFP4 takes its tail instance (gpt-oss-120b's k = 2880) the fused form measured 1.04x slower
  // (bench/results/2026-11-28-h200-w4-mma-act r2): that GEMM1 keeps h and the activation kernel.
  if (w13.format == Format::MXFP4 && half_last_stage(static_cast<int>(w13.k)) && tail_on())
    return "MXFP4 with k % 256 in 1..128 (its tail instance): measured slower fused";
  return nullptr;
}

void w4_mma_gemm1_activation(const W4Weights& w13, const void* a, const ActivationParams& act, int groups,
                             const int32_t* offsets, int64_t max_rows, cudaStream_t stream, int sm_count) {
  if (max_rows <= 0 || groups <= 0) return;
  if (const char* why = w4_mma_act_refusal(w13, act, groups, max_rows))
    throw Error(std::string("w4 mma GEMM1 + activation: ") + why);
  const Params p = make_params(w13, a, nullptr, groups, offsets);
  const int64_t per_block = static_cast<int64_t>(kWarps) * 8;  // activation outputs per block
  const dim3 grid(static_cast<unsigned>((act.N + per_block - 1) / per_block),
                  static_cast<unsigned>(std::min<int64_t>(max_rows, groups)));
  const int sms = sms_or_device(sm_count);
  if (w13.format == Format::MXFP4) launch_mma_act<kMx>(p, act, grid, stream, sms);
  else launch_mma_act<kNv>(p, act, grid, stream, sms);
}

bool w4_mma_lean(Format f) {
  static const bool on = !env_switch_is_zero("FUSEDMOE_W4_LEAN");
  static const bool nv = !env_switch_is_zero("FUSEDMOE_W4_LEAN_NV");
  return on && (f == Format::MXFP4 || (nv && f == Format::NVFP4));
}

bool w4_shape_ok(const W4Weights& w, const char** why) {
  if (w.k % 32 != 0) {
    *why = "the 4-bit GPU kernels need the hidden and intermediate sizes to be multiples of 32";
    return false;
  }
  if (w.n % 16 != 0) {  // the mma kernel's warps own 16 whole rows (n is 2 x or 1 x a size above)
    *why = "the 4-bit GPU kernels need the weight row count to be a multiple of 16";
    return false;
  }
  if (w.format == Format::W4A8_INT4 && w.k % 128 != 0) {
    *why = "w4a8-int4 needs the hidden and intermediate sizes to be multiples of its group size 128";
    return false;
  }
  if (reinterpret_cast<uintptr_t>(w.w) % 16 != 0) {
    *why = "the 4-bit weights must be 16-byte aligned";
    return false;
  }
  if (w.format != Format::MXFP4 && reinterpret_cast<uintptr_t>(w.scale) % 2 != 0) {
    // The mma kernel loads a row's two e4m3 16-block scales (nvfp4) or its bf16 group scale
    // (w4a8) as one 16-bit word.
    *why = "the nvfp4 / w4a8-int4 weight scales must be 2-byte aligned";
    return false;
  }
  if (w.n >= INT32_MAX || w.k >= INT32_MAX) {
    *why = "hidden and intermediate sizes must stay below 2^31";
    return false;
  }
  return true;
}

// FUSEDMOE_W4_SPLIT=0: w4_mma_split_pays always false (the finalize then reads one y).
bool split_on() {
  static const bool on = !env_switch_is_zero("FUSEDMOE_W4_SPLIT");
  return on;
}
// Resident warps per SM of the lean 8-token instances (6 blocks of kWarps at 80 registers).
constexpr int64_t kSplitResidentWarpsPerSm = 6 * kWarps;
constexpr int64_t kSplitMinK = 1024;  // 4 stages of 256: 2 per half

bool w4_mma_split_pays(const W4Weights& w, int groups, int64_t max_rows, int sm_count) {
  // NVFP4 only: MXFP4 (gpt-oss-120b's k = 2880, the tail instance) measured 1.00-1.04x slower split.
  if (!split_on() || w.format != Format::NVFP4 || !w4_mma_lean(w.format)) return false;
  if (max_rows <= 0 || groups <= 0 || sm_count <= 0 || tokens_per_pass(max_rows, groups) != 8 || w.k < kSplitMinK)
    return false;
  const int64_t per_block = static_cast<int64_t>(kWarps) * 16;
  const int64_t blocks = (w.n + per_block - 1) / per_block * std::min<int64_t>(max_rows, groups);
  return 2 * blocks * kWarps <= kSplitResidentWarpsPerSm * sm_count;  // both halves in one wave
}

void w4_mma_grouped_gemm(const W4Weights& w, const void* a, float* d, int groups, const int32_t* offsets,
                         int64_t max_rows, cudaStream_t stream, float* d2, int sm_count) {
  if (max_rows <= 0 || groups <= 0) return;
  if (d2 != nullptr && !w4_mma_split_pays(w, groups, max_rows, sm_count))
    throw Error("w4 mma GEMM: d2 (k split in two) given for a call w4_mma_split_pays() refuses");
  Params p = make_params(w, a, d, groups, offsets);
  p.d2 = d2;
  const int64_t active = std::min<int64_t>(max_rows, groups);
  // Tokens per pass: by the expected rows of an expert (tokens_per_pass; each pass streams the expert's weights once);
  // rows beyond are taken in further passes. (16-token passes from 6 or 7 expected rows were slower in the register
  // form, bench/results/2026-11-28-h200-w4-nt2-rows; with kSx from 7 they are faster: bench/results/2026-11-29-h200-w4-tile-rows.)
  // (The kSx 16- / 32-token tiles on 8-warp blocks measured no better: bench/results/2026-11-29-h200-w4-sx-warps.)
  const int nt = tokens_per_pass(max_rows, groups) / 8;
  // One 16-row tile per warp: two measured slower (218-255 registers, fewer warps; NOTES.md).
  const int64_t per_block = static_cast<int64_t>(kWarps) * 16;
  const dim3 grid(static_cast<unsigned>((w.n + per_block - 1) / per_block), static_cast<unsigned>(active));
  const int sms = sms_or_device(sm_count);
  switch (w.format) {
    case Format::W4A8_INT4: launch_mma<kInt4>(p, nt, grid, stream, sms); break;
    case Format::MXFP4: launch_mma<kMx>(p, nt, grid, stream, sms); break;
    case Format::NVFP4: launch_mma<kNv>(p, nt, grid, stream, sms); break;
    default: throw Error("w4 grouped GEMM: not a 4-bit format");
  }
}

void w4_dequantize_weights(const W4Weights& w, int e0, int count, const int32_t* offsets, void* out,
                           cudaStream_t stream) {
  if (count <= 0) return;
  const Params p = make_params(w, nullptr, nullptr, 0, offsets);
  const int64_t total = static_cast<int64_t>(count) * w.n * (w.k / 8);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, 132 * 16));
  auto* o = static_cast<uint16_t*>(out);
  switch (w.format) {
    case Format::MXFP4: launch_chained(w4_dequant_kernel<kMx>, blocks, 256, 0, stream, p, e0, count, o); break;
    case Format::NVFP4: launch_chained(w4_dequant_kernel<kNv>, blocks, 256, 0, stream, p, e0, count, o); break;
    default: throw Error("w4 dequantize: MXFP4 / NVFP4 only (W4A8 runs its wgmma kernel at large batches)");
  }
}

}  // namespace fusedmoe::cuda
