// The expert layer of one token in one kernel for MXFP4 / NVFP4 weights with 16-bit activations,
// MXFP4 with per-token fp8 activations, W4A8 (int4) and NVFP4 W4A4 (see kA below)
// (the fp8 kernel's structure, decode_layer.cu; the 4-bit decoding and numerics of the mma way,
// w4_gemm.hpp / w4_decode.cuh). The chain it replaces at one token is plan + gather, the 4-bit
// mma GEMM1, the activation, the mma GEMM2 and finalize: five kernels of 5-15 us each on
// Qwen3-30B-A3B, whose weights take 6.6 us to read (bench/results/2026-11-22-h100-b28eb11-4bit-grid).
//
//  1. each CTA rounds x to bf16 into shared memory (as the gather), reads the token's ids and
//     builds the block-scale table (scale code -> bf16x2 multiplier, as the mma kernel);
//  2. GEMM1 + activation over (slot, 8 outputs) tasks, two at a time per CTA (halves of 8 warps
//     splitting k, each lane 32 values = 16 packed bytes of a gate and an up row per 128-wide
//     k-block, decoded in registers to exact bf16 products and multiplied with mma.sync m16n8k16,
//     the gate / up rows of output g the MMA rows g / g + 8), software-pipelined: a task's loads
//     are issued before the previous task's decode; the sums x 2^kE2m1Shift (the mma kernel's D),
//     the GENERIC factor (NVFP4: the expert's global scale), bias, activation and rounding as the
//     activation kernel (ActivationRowStore), stored as bf16 into GEMM2's operand [topk, N] in the
//     MMA's B-register order (mma_order; x in shared memory too: no permutes in the MMA loops);
//     after its first task thread 0 bulk-copies the CTA's W2 slice (packed rows of its output
//     columns, their block scales where the layout allows a copy, the GEMM2 bias) into shared
//     memory;
//  3. (scales in the swizzled layout: the CTA's threads gather them) a grid-wide barrier;
//  4. GEMM2 of the CTA's columns from shared memory against each slot's operand row (read at L2),
//     x 2^kE2m1Shift, then the top-k sum in slot order with finalize's add_slot terms.
// Every product is the oracle's (exact bf16 values); sums fp32 in the MMA's order (deterministic).
//
// Where the time goes (H100, globaltimer stamps per CTA, bench/results/2026-11-26-h100-decode-layer-w4):
// the kernel is bound by instruction issue, not by HBM (ncu: DRAM 22-29% of peak, ~1.2 warp
// instructions per cycle per SM): the e2m1 decode is ~5 instructions per bf16 pair (2 shifts, 2
// LOP3, HMUL2) for one token's MMA, so GEMM1 of Qwen3-30B-A3B issues ~25K warp instructions per SM
// and GEMM2 of gpt-oss-120b (its 24-column slices in 16-row MMA blocks) ~10 us after the barrier.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <string>

#include "cuda/activation_math.cuh"
#include "cuda/activation_store.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.hpp"
#include "cuda/decode_layer.hpp"
#include "cuda/decode_layer_common.cuh"
#include "cuda/device_utils.cuh"
#include "cuda/env_switch.hpp"
#include "cuda/expert_id.cuh"
#include "cuda/finalize_term.cuh"
#include "cuda/mbarrier.cuh"
#include "cuda/small_m_mma.cuh"
#include "cuda/w4_decode.cuh"
#include "fusedmoe/error.hpp"

namespace fusedmoe::cuda {
namespace {

using namespace decode_layer;
using namespace w4;
using small_m::load16_stream;

constexpr int kKBlockValues = 128;  // k values of a k-block: 4 lanes x 32
constexpr int kKBlockBytes = 64;    // packed bytes of a row per k-block
constexpr int kMaxW4Cols = 32;      // output columns per CTA (rounded up to 16)

// mma_order below: the MMA's B-register order, each 8 values k0..k7 stored as the pairs (k0,k4)
// (k1,k5) (k2,k6) (k3,k7) that decode_word's weight pairs meet (KOrder::W4_MMA, w4_kperm.cuh:
// w4_mma_pos), so the MMA loops load B registers without permuting.

// Values per scale: mxfp4 32 (e8m0), nvfp4 16 (e4m3), W4A8 128 (a bf16 group scale: 2 bytes).
template <int F>
constexpr int block_size() {
  return F == kMx ? 32 : (F == kNv ? 16 : 128);
}
template <int F>
constexpr int scale_bytes() {
  return F == kInt4 ? 2 : 1;
}
// Scale bytes of one W2 row in the CTA's shared-memory copy (the linear layout's row).
int64_t scale_row_bytes(Format f, int64_t k) {
  return f == Format::MXFP4 ? k / 32 : (f == Format::NVFP4 ? k / 16 : k / 128 * 2);
}
__host__ __device__ inline int64_t round16(int64_t v) { return (v + 15) / 16 * 16; }

// The block scale of (expert e, row, block b) in the linear or the 128x4-swizzled layout, and the
// step to the same lane's block of the next k-block (linear: 128 / bs bytes; swizzled: one (mxfp4)
// or two (nvfp4) 4-block column tiles of 512 bytes).
template <int F>
__device__ __forceinline__ const uint8_t* scale_at(const W4Weights& w, int64_t e, int64_t row, int64_t b) {
  const int64_t cols = w.k / block_size<F>();
  const uint8_t* s = static_cast<const uint8_t*>(w.scale);
  if (F != kInt4 && w.swizzled) {
    const int64_t per_expert = ((w.n + 127) / 128 * 128) * ((cols + 3) / 4 * 4);
    return s + e * per_expert + swizzled_offset(row, b, cols);
  }
  return s + ((e * w.n + row) * cols + b) * scale_bytes<F>();
}
template <int F>
__device__ __forceinline__ int scale_step(const W4Weights& w) {
  return F != kInt4 && w.swizzled ? (F == kMx ? 512 : 1024) : kKBlockValues / block_size<F>() * scale_bytes<F>();
}
// The lane's raw scale bits of a k-block: mxfp4 one e8m0 byte (its 32 values are one block),
// nvfp4 two e4m3 bytes (two 16-blocks, adjacent in both layouts), W4A8 the bf16 group scale (the
// k-block is one group).
template <int F>
__device__ __forceinline__ uint32_t load_raw(const uint8_t* q, bool ok) {
  if (!ok) return 0u;
  if constexpr (F == kMx) return __ldg(q);
  else return __ldg(reinterpret_cast<const uint16_t*>(q));
}

// c += (16 rows: lo = rows g, hi = rows g + 8) x (the lane's 32 operand values) over one k-block:
// 4 packed words per row, each decoded to 4 bf16 pairs and multiplied in two k16 MMA steps.
// W4A8: int4 decoded to exact fp16 values, the k-block's sums (one group of every row) times the
// rows' group scales in fp32 (as the mma kernel).
template <int F>
__device__ __forceinline__ void mma_w4_kblock(float (&c)[4], const uint4& lo, const uint4& hi, uint32_t raw_lo,
                                              uint32_t raw_hi, const uint32_t (&b)[4][4], const uint32_t* table,
                                              bool uint4b8) {
  uint32_t s_lo[2] = {0u, 0u}, s_hi[2] = {0u, 0u};  // e2m1 multipliers; nvfp4: the lane's two 16-blocks
  if constexpr (F != kInt4) {
    s_lo[0] = table[raw_lo & 0xFFu], s_hi[0] = table[raw_hi & 0xFFu];
    if constexpr (F == kNv) s_lo[1] = table[(raw_lo >> 8) & 0xFFu], s_hi[1] = table[(raw_hi >> 8) & 0xFFu];
    else s_lo[1] = s_lo[0], s_hi[1] = s_hi[0];
  }
  float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  float (&dst)[4] = F == kInt4 ? part : c;  // W4A8: the group's sums, scaled below
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    uint32_t pl[4], ph[4];
    decode_word<F, true>(q == 0 ? lo.x : q == 1 ? lo.y : q == 2 ? lo.z : lo.w, s_lo[q >> 1], uint4b8, pl);
    decode_word<F, true>(q == 0 ? hi.x : q == 1 ? hi.y : q == 2 ? hi.z : hi.w, s_hi[q >> 1], uint4b8, ph);
    const uint32_t a0[4] = {pl[0], ph[0], pl[1], ph[1]};
    const uint32_t a1[4] = {pl[2], ph[2], pl[3], ph[3]};
    mma16816<F>(dst, a0, b[q][0], b[q][1]);
    mma16816<F>(dst, a1, b[q][2], b[q][3]);
  }
  if constexpr (F == kInt4) {
    const float g_lo = __uint_as_float(raw_lo << 16), g_hi = __uint_as_float(raw_hi << 16);
    c[0] = fmaf(part[0], g_lo, c[0]);
    c[1] = fmaf(part[1], g_lo, c[1]);
    c[2] = fmaf(part[2], g_hi, c[2]);
    c[3] = fmaf(part[3], g_hi, c[3]);
  }
}

// F: kMx / kNv / kInt4; kU: GEMM1 k-blocks per lane in flight (ceil(k-blocks / 8) up to 4: one
// load round per task where K <= 4096, no registers for k-blocks no warp has); kA: the
// activations: kBf16 (16-bit), kFp8Row (per-token fp8: mxfp4-fp8, W4A8: x quantised with its
// row's scale, the activation staged in fp32 and quantised per slot row after the grid barrier,
// as decode_layer.cu's fp8-channel mode, into shared memory; the operands hold the e4m3 codes'
// exact 16-bit values) or kNvfp4 (W4A4: x quantised per slot with the slot's expert's input
// scale, 16-wide blocks, into one row per slot; the activation staged and quantised by 16-wide
// blocks after the barrier; the operands hold e2m1 x e4m3 values, exact in bf16).
enum ActMode : int { kBf16 = 0, kFp8Row = 1, kNvfp4 = 2 };
template <int F, int kU, int kA>
__global__ void __launch_bounds__(kThreads, 1) decode_layer_w4_kernel(DecodeLayerParams p, int64_t cols) {
  chain_wait();
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ __align__(8) uint64_t w2_bar;
  __shared__ uint32_t table[256];  // scale code -> decode_word's bf16x2 multiplier
  __shared__ int32_t expert[kMaxSlots];
  __shared__ float weight[kMaxSlots], factor[kMaxSlots];
  __shared__ float part[kHalves][2][kHalfWarps][2][kOuts];  // each warp's gate / up sums, by task parity
  // GEMM2 sums of the CTA's columns by k part. 4 KB (at most 32 columns: K <= 4224 on 132 SMs):
  // with the fp8 kernel's [4][8][128] (16 KB) gpt-oss-120b mxfp4 needed the 196 KB shared-memory
  // configuration instead of 164 (L1 60 KB instead of 92; 0.990x the layer time with 92). L1 holds
  // the block-scale loads: GEMM2's operand rows copied to shared memory (+23 KB, L1 28 KB) made
  // gpt-oss 1.05-1.15x slower (H100, bench/results/2026-11-26-h100-decode-layer-w4 r8 / r9).
  __shared__ float ys[4][kMaxSlots][kMaxW4Cols];
  __shared__ float x_scale;                // kFp8Row: x's row scale
  __shared__ float gs2_slot[kA == kNvfp4 ? kMaxSlots : 1];  // kNvfp4: the slots' GEMM2 global scales
  constexpr float kOut = F == kInt4 ? 1.0f : static_cast<float>(1 << kE2m1Shift);  // the mma kernel's D factor
  constexpr Operand kOp = F == kInt4 ? Operand::FP16 : Operand::BF16;
  constexpr bool kRow = kA == kFp8Row, kStaged = kA != kBf16;
  static_assert(F != kInt4 || kRow, "W4A8 has fp8 activations");

  const int topk = static_cast<int>(p.gather.topk);
  const int64_t K = p.gather.K, N = p.act.N;
  const int64_t hk = K / 2, hn = N / 2;            // packed row bytes of W13 / W2 (multiples of 16)
  const int64_t sb = N / block_size<F>() * scale_bytes<F>();  // scale bytes of a W2 row
  uint8_t* w2s = smem;                             // [topk][cols][hn]
  uint8_t* w2sc = w2s + topk * cols * hn;          // [topk][cols][sb]
  uint8_t* xs = w2sc + round16(topk * cols * sb);  // [K] 16-bit ([topk][K] for kNvfp4: per slot)
  const int64_t x_rows = kA == kNvfp4 ? topk : 1;
  float* bias2 = reinterpret_cast<float*>(xs + 2 * K * x_rows);  // [topk][cols]
  uint8_t* a2s = reinterpret_cast<uint8_t*>(bias2 + topk * cols);  // kStaged: [topk][N] GEMM2 operand (16-bit)
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * cols;
  const int64_t ncols = K - c0 < 0 ? 0 : (K - c0 < cols ? K - c0 : cols);
  const int first = F == kMx ? t : (F == kNv ? 2 * t : 0);  // the lane's first block of a k-block
  const bool uint4b8 = p.w4_13.uint4b8;
  // Linear scales whose CTA slices are 16-byte runs are bulk-copied with the weights; others
  // (the swizzled layout) are gathered by the CTA's threads before the grid barrier.
  const bool copy_scales = !p.w4_2.swizzled && (cols * sb) % 16 == 0 && (K * sb) % 16 == 0 &&
                           aligned16(p.w4_2.scale);

  // ---- 1. x, slots, scale table ----
  // The slots' ids and router weights are loaded first, into registers, and used after x (as
  // decode_layer.cu: loaded after x's quantisation they waited for it).
  const int32_t slot_id = tid < topk ? p.ids[tid] : -1;
  const float slot_weight = tid < topk ? p.fin.topk_weights[tid] : 0.0f;
  // x (in mma_order): bf16, or (kRow) its row's e4m3 codes as 16-bit values after a block-wide
  // amax (the gather's ROW case).
  float s1 = 1.0f;
  if constexpr (kRow) {
    float m = 0.0f;
    for (int64_t l = tid; l < K / 8; l += kThreads) {
      float v[8];
      load8_as_float(p.gather.x, p.gather.x_dtype, l * 8, v);
      m = fmaxf(m, amax8(v));
    }
    s1 = scale_from_amax(block_max(m));
    if (tid == 0) x_scale = s1;
  }
  for (int64_t l = tid; l < (kA == kNvfp4 ? 0 : K / 8); l += kThreads) {
    float v[8];
    load8_as_float(p.gather.x, p.gather.x_dtype, l * 8, v);
    const float perm[8] = {v[0], v[4], v[1], v[5], v[2], v[6], v[3], v[7]};  // mma_order
    if constexpr (kRow) store8_row_codes(xs, kOp, l * 8, perm, s1);
    else store8_operand16(xs, Operand::BF16, l * 8, perm);
  }
  if (tid < topk) {
    expert[tid] = local_expert_of(slot_id, p.expert_map, p.num_experts, p.num_global);
    weight[tid] = slot_weight;
  }
  if constexpr (F != kInt4)
    for (int i = tid; i < 256; i += kThreads) table[i] = scale_bits<F>(static_cast<uint32_t>(i));
  if (tid == 0) {
    mbar_init(&w2_bar, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  // Each 16-wide block of 8 values in mma_order: the two halves of 8 of a block permuted alike.
  auto store16_mma = [&](uint8_t* row, int64_t c, const float (&v)[16]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float perm[8] = {v[8 * h], v[8 * h + 4], v[8 * h + 1], v[8 * h + 5],
                             v[8 * h + 2], v[8 * h + 6], v[8 * h + 3], v[8 * h + 7]};
      store8_operand16(row, Operand::BF16, c + 8 * h, perm);
    }
  };
  if constexpr (kA == kNvfp4) {
    // x quantised for every slot with its expert's input scale (the gather's NVFP4 case:
    // gs = 1 / input_scale[e], 16-wide blocks), one row per slot.
    const int per_row = static_cast<int>(K / 16);
    for (int b = tid; b < topk * per_row; b += kThreads) {
      const int s = b / per_row;
      const int64_t c = static_cast<int64_t>(b - s * per_row) * 16;
      if (expert[s] < 0) continue;
      float v[16], lo[8], hi[8];
      load8_as_float(p.gather.x, p.gather.x_dtype, c, lo);
      load8_as_float(p.gather.x, p.gather.x_dtype, c + 8, hi);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = lo[j], v[8 + j] = hi[j];
      nvfp4_block_values(v, 1.0f / p.gather.nvfp4_input_scale[expert[s]]);
      store16_mma(xs + 2 * K * s, c, v);
    }
    __syncthreads();
  }
  // The W2 rows (and their scales, bias) of the CTA's columns for every slot with an expert,
  // issued by thread 0 after its first GEMM1 task (decode_layer.cu: issued at the start they
  // queued ahead of GEMM1's loads).
  auto issue_w2 = [&]() {
    const uint32_t w_bytes = static_cast<uint32_t>(ncols * hn), s_bytes = static_cast<uint32_t>(ncols * sb),
                   b_bytes = static_cast<uint32_t>(ncols * 4);
    uint32_t bytes = 0;
    for (int s = 0; s < topk; ++s)
      if (expert[s] >= 0) bytes += w_bytes + (copy_scales ? s_bytes : 0u) + (p.fin.bias ? b_bytes : 0u);
    mbar_expect_tx(&w2_bar, bytes);  // the arrive; with no bytes the phase completes here
    for (int s = 0; s < topk && ncols > 0; ++s) {
      const int64_t e = expert[s];
      if (e < 0) continue;
      bulk_load_1d(w2s + s * cols * hn, p.w4_2.w + (e * K + c0) * hn, w_bytes, &w2_bar);
      if (copy_scales)
        bulk_load_1d(w2sc + s * cols * sb, static_cast<const uint8_t*>(p.w4_2.scale) + (e * K + c0) * sb, s_bytes,
                     &w2_bar);
      if (p.fin.bias) bulk_load_1d(bias2 + s * cols, p.fin.bias + e * K + c0, b_bytes, &w2_bar);
    }
  };
  bool w2_issued = false;

  // ---- 2. GEMM1 + activation: tasks (slot, 8 outputs), one per CTA half at a time ----
  // As decode_layer.cu (one half barrier per task, partial sums double-buffered, the epilogue
  // warp rotating), and software-pipelined: a task's weight loads are issued before the previous
  // task's decode and MMAs (two register sets, A and B), since at one token the decode costs as
  // much time as the loads' latency.
  {
    const ActivationParams& ap = p.act;
    const int half = warp / kHalfWarps, hw = warp % kHalfWarps;
    const int blocks = static_cast<int>((N + kOuts - 1) / kOuts), tasks = topk * blocks;
    const int kblocks = static_cast<int>((K + kKBlockValues - 1) / kKBlockValues);
    const int sstep = scale_step<F>(p.w4_13);
    const int stride = static_cast<int>(gridDim.x) * kHalves;
    // One task's state: its first round of weight / scale loads (k-blocks hw + 8u, u < kU) and
    // the epilogue inputs.
    struct Job {
      uint4 wl[kU], wh[kU];
      uint32_t rl[kU], rh[kU];
      const uint8_t* wg;
      const uint8_t* wu;
      const uint8_t* sg;
      const uint8_t* su;
      float bg, bu, ds;
      int s, ob;
      bool nok;
    };
    auto next_task = [&](int task) {  // the first task from `task` on whose slot has an expert
      while (task < tasks && expert[task / blocks] < 0) task += stride;
      return task;
    };
    // Loads of k-blocks base + 8u of a job's rows.
    auto load_round = [&](Job& j, int base) {
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int kb = base + u * kHalfWarps;
        const bool in = kb < kblocks && kb * kKBlockValues + 32 * t < K && j.nok;
        j.wl[u] = load16_stream(j.wg + kb * kKBlockBytes, in);
        j.wh[u] = load16_stream(j.wu + kb * kKBlockBytes, in);
        j.rl[u] = load_raw<F>(j.sg + kb * sstep, in);
        j.rh[u] = load_raw<F>(j.su + kb * sstep, in);
      }
    };
    auto issue = [&](int task, Job& j) {
      j.s = task / blocks;
      j.ob = task - j.s * blocks;
      const int e = expert[j.s];
      const int64_t er = static_cast<int64_t>(e) * ap.R;  // expert e's first GEMM1 row
      // The epilogue's inputs other than the sums (epilogue lanes: see finish).
      const int64_t ne = static_cast<int64_t>(j.ob) * kOuts + lane;
      j.bg = j.bu = 0.0f;
      j.ds = 1.0f;
      if (lane < kOuts && ne < N) {
        int64_t ge = 0, ue = 0;
        gate_up_columns(ap, ne, ge, ue);
        if (ap.bias) j.bg = ap.bias[er + ge], j.bu = ap.bias[er + ue];
        // generic_factor_with_row's product (a_row: x's scale in kRow; a_expert: W4A4's input
        // scale; w_expert: NVFP4's global weight scale) with the a_expert test resolved at compile
        // time: the helper's run-time test made the NVFP4 layers 2-3% slower at one token (H100,
        // bench/results/2026-11-26-h100-decode-layer-w4/review).
        float f = 1.0f;
        f *= kRow ? x_scale : 1.0f;
        if constexpr (kA == kNvfp4) f *= ap.dq.a_expert[e];
        if (ap.dq.w_expert) f *= ap.dq.w_expert[e];
        j.ds = f;
      }
      // The gate / up rows of output ob * 8 + g (zeros past N).
      const int64_t n = static_cast<int64_t>(j.ob) * kOuts + g;
      j.nok = n < N;
      int64_t gi = 0, ui = 0;
      if (j.nok) gate_up_columns(ap, n, gi, ui);
      j.wg = p.w4_13.w + (er + gi) * hk + 16 * t;
      j.wu = p.w4_13.w + (er + ui) * hk + 16 * t;
      j.sg = scale_at<F>(p.w4_13, e, gi, first);
      j.su = scale_at<F>(p.w4_13, e, ui, first);
      load_round(j, hw);
    };
    // The MMAs of the round in j (k-blocks base + 8u); x in shared memory already in the MMA's
    // B-register order.
    auto mma_round = [&](const Job& j, int base, float (&c)[4]) {
      const uint8_t* xr = xs + (kA == kNvfp4 ? 2 * K * j.s : 0);  // W4A4: the slot's row
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int kb = base + u * kHalfWarps;
        if (kb >= kblocks) break;  // the same for the whole warp (mma.sync)
        const int k0 = kb * kKBlockValues + 32 * t;
        uint32_t bx[4][4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const uint4 v = k0 < K ? ld_shared16(xr + 2 * k0 + 16 * q) : make_uint4(0, 0, 0, 0);
          bx[q][0] = v.x, bx[q][1] = v.y, bx[q][2] = v.z, bx[q][3] = v.w;
        }
        mma_w4_kblock<F>(c, j.wl[u], j.wh[u], j.rl[u], j.rh[u], bx, table, uint4b8);
      }
    };
    int it = 0;
    auto finish = [&](Job& j) {
      float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      mma_round(j, hw, c);
      // K > 8 * kU k-blocks (K > 4096 at kU = 4): the further rounds unpipelined.
      for (int base = hw + kHalfWarps * kU; base < kblocks; base += kHalfWarps * kU) {
        load_round(j, base);
        mma_round(j, base, c);
      }
      if (tid == 0 && !w2_issued) {  // after the first task's weight loads (see issue_w2)
        issue_w2();
        w2_issued = true;
      }
      const int buf = it & 1;
      const bool epi = hw == (it % kHalfWarps) && lane < kOuts;  // this task's epilogue lanes
      ++it;
      // C fragment: c[0] = gate sum, c[2] = up sum of output ob * 8 + g (every column the same).
      if (t == 0) {
        part[half][buf][hw][0][g] = c[0];
        part[half][buf][hw][1][g] = c[2];
      }
      half_barrier(half);
      const int64_t ne = static_cast<int64_t>(j.ob) * kOuts + lane;
      if (epi && ne < N) {
        float gate, up;
        sum_task_parts(part[half][buf], lane, gate, up);
        // The mma kernel's D (sums x 2^kE2m1Shift, exact), then the activation kernel's steps,
        // stored at its place in GEMM2's B-register order (see x above).
        ActivationRowStore st;
        st.ds = j.ds;
        st.scaled = true;  // GENERIC
        const float v = st.value(ap, gate * kOut, up * kOut, j.bg, j.bu);
        if constexpr (kStaged) p.stage[j.s * N + ne] = v;  // quantised after the barrier
        else static_cast<__nv_bfloat16*>(ap.out)[j.s * N + w4_mma_pos(ne)] = __float2bfloat16_rn(v);
      }
    };
    Job A, B;
    int task = next_task(static_cast<int>(first_task(p, half)));
    if (task < tasks) issue(task, A);
    while (task < tasks) {
      int nt = next_task(task + stride);
      if (nt < tasks) issue(nt, B);
      finish(A);
      task = nt;
      if (task >= tasks) break;
      nt = next_task(task + stride);
      if (nt < tasks) issue(nt, A);
      finish(B);
      task = nt;
    }
  }

  if (tid == 0 && !w2_issued) issue_w2();
  // Swizzled (or unaligned) W2 scales: the CTA's rows gathered into the linear copy.
  if (!copy_scales) {
    const int64_t per_slot = ncols * sb;
    for (int64_t i = tid; i < topk * per_slot; i += kThreads) {
      const int s = static_cast<int>(i / per_slot);
      const int64_t r = (i % per_slot) / sb, b = i % sb;
      if (expert[s] >= 0) w2sc[(s * cols + r) * sb + b] = *scale_at<F>(p.w4_2, expert[s], c0 + r, b);
    }
  }
  // ---- 3. every slot's operand row is complete ----
  if (!kRow && tid < topk) factor[tid] = expert[tid] >= 0 ? generic_factor(p.fin.dq, 0, expert[tid]) : 1.0f;
  // W4A4: each slot's GEMM2 input scale (gs = 1 / input_scale[e]), loaded across the barrier.
  if constexpr (kA == kNvfp4)
    if (tid < topk) gs2_slot[tid] = expert[tid] >= 0 ? 1.0f / p.act.nvfp4_input_scale[expert[tid]] : 1.0f;
  __syncthreads();
  cooperative_groups::this_grid().sync();
  if constexpr (kRow) {
    // Every slot's staged row quantised with its own scale (one warp per slot, as decode_layer.cu's
    // fp8-channel mode: the first kHeld chunks of 8 per lane stay in registers between the amax
    // and the codes, longer rows read the rest twice at L2) into shared memory in mma_order; the
    // slot's factor is generic_factor's product with a_row = that scale.
    const int per_row = static_cast<int>(N / 8);
    auto store_codes = [&](int s, int l, const float (&v)[8], float s2) {
      const float perm[8] = {v[0], v[4], v[1], v[5], v[2], v[6], v[3], v[7]};  // mma_order
      store8_row_codes(a2s, kOp, static_cast<int64_t>(s) * N + 8 * static_cast<int64_t>(l), perm, s2);
    };
    for (int s = warp; s < topk; s += kWarps) {
      if (expert[s] < 0) continue;
      const float4* row = reinterpret_cast<const float4*>(p.stage + static_cast<int64_t>(s) * N);
      const float s2 =
          quantise_staged_row(row, per_row, lane, [&](int l, const float (&v)[8], float sc) { store_codes(s, l, v, sc); });
      if (lane == 0) factor[s] = generic_factor_with_row(p.fin.dq, s2, expert[s]);
    }
    __syncthreads();
  }
  if constexpr (kA == kNvfp4) {
    // Every slot's staged row quantised by 16-wide blocks with its expert's input scale (the
    // activation kernel's NVFP4 case), into shared memory in mma_order.
    const int per_row = static_cast<int>(N / 16);
    for (int b = tid; b < topk * per_row; b += kThreads) {
      const int s = b / per_row;
      const int64_t c = static_cast<int64_t>(b - s * per_row) * 16;
      if (expert[s] < 0) continue;
      const float4* src = reinterpret_cast<const float4*>(p.stage + static_cast<int64_t>(s) * N + c);
      float v[16];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float4 f4 = __ldcg(src + q);
        v[4 * q] = f4.x, v[4 * q + 1] = f4.y, v[4 * q + 2] = f4.z, v[4 * q + 3] = f4.w;
      }
      // Unrolled: the block's 16 divisions and roundings independent of each other (rolled, v lived in local memory
      // and the 16 ran as one dependent chain, on the path after the grid barrier). Both forms give the same values.
      if (p.nvfp4_unrolled) nvfp4_block_values<false>(v, gs2_slot[s]);
      else nvfp4_block_values<true>(v, gs2_slot[s]);
      store16_mma(a2s + 2 * N * s, c, v);
    }
    __syncthreads();
  }

  // ---- 4. GEMM2 of the CTA's columns from shared memory, then the top-k sum ----
  // Units (slot, 16-column block, k part), two accumulator sets (even / odd k-blocks) as
  // decode_layer.cu. Rows past ncols (the CTA's last partial block) repeat its last row; their
  // sums are not used.
  if (ncols > 0) {
    mbar_wait(&w2_bar, 0);
    const uint8_t* a2 = static_cast<const uint8_t*>(p.act.out);
    const int64_t qs = (ncols + 15) / 16;
    const int64_t kblocks = (N + kKBlockValues - 1) / kKBlockValues;
    const int pairs = topk * static_cast<int>(qs);
    const int kparts = pairs * 4 <= kWarps ? 4 : pairs * 2 <= kWarps ? 2 : 1;
    const int sstep = kKBlockValues / block_size<F>() * scale_bytes<F>();
    // 32-bit unit arithmetic (decode_layer.cu: the 64-bit divisions' calls showed in GEMM2's samples)
    for (int unit = warp; unit < pairs * kparts; unit += kWarps) {
      const int pair = unit / kparts, kp = unit - pair * kparts;
      const int s = pair / static_cast<int>(qs);
      const int64_t q = pair - s * static_cast<int>(qs);
      if (expert[s] < 0) continue;
      const int64_t r_lo = min(q * 16 + g, ncols - 1), r_hi = min(q * 16 + g + 8, ncols - 1);
      const uint8_t* wlo = w2s + (s * cols + r_lo) * hn + 16 * t;
      const uint8_t* whi = w2s + (s * cols + r_hi) * hn + 16 * t;
      const uint8_t* slo = w2sc + (s * cols + r_lo) * sb + first;
      const uint8_t* shi = w2sc + (s * cols + r_hi) * sb + first;
      const uint8_t* ar = (kStaged ? a2s : a2) + (s * N + 32 * t) * 2;
      float c[2][4] = {};
      // Compact code (2 k-blocks per step, no unrolled tail): it runs once per CTA.
#pragma unroll 1
      for (int64_t kb = kp * 2; kb < kblocks; kb += kparts * 2) {
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int64_t kbu = kb + u;
          if (kbu >= kblocks) break;  // the same for the whole warp
          const bool in = kbu * kKBlockValues + 32 * t < N;
          const uint4 zero = make_uint4(0, 0, 0, 0);
          const uint4 wl = in ? ld_shared16(wlo + kbu * kKBlockBytes) : zero;
          const uint4 wh = in ? ld_shared16(whi + kbu * kKBlockBytes) : zero;
          uint32_t rl = 0, rh = 0;
          if (in) {
            if constexpr (F == kMx) rl = slo[kbu * sstep], rh = shi[kbu * sstep];
            else  // nvfp4: two e4m3 bytes; W4A8: the bf16 group scale
              rl = slo[kbu * sstep] | (slo[kbu * sstep + 1] << 8), rh = shi[kbu * sstep] | (shi[kbu * sstep + 1] << 8);
          }
          uint32_t bx[4][4];  // the operand row is stored in the B-register order (mma_order)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const uint8_t* q = ar + kbu * kKBlockValues * 2 + 16 * j;
            const uint4 v = in ? (kStaged ? ld_shared16(q) : ld_l2_16(q)) : zero;
            bx[j][0] = v.x, bx[j][1] = v.y, bx[j][2] = v.z, bx[j][3] = v.w;
          }
          mma_w4_kblock<F>(c[u], wl, wh, rl, rh, bx, table, uint4b8);
        }
      }
      if (t == 0) {
        ys[kp][s][q * 16 + g] = (c[0][0] + c[1][0]) * kOut;
        ys[kp][s][q * 16 + g + 8] = (c[0][2] + c[1][2]) * kOut;
      }
    }
    __syncthreads();
    topk_sum_store(p.fin, ys, kparts, expert, weight, factor, p.fin.bias ? bias2 : nullptr, nullptr, topk,
                   static_cast<int>(cols), static_cast<int>(ncols), c0);
  }
  __syncthreads();
}

template <int kU>
void launch_w4(const DecodeLayerParams& p, int64_t cols, int64_t smem, cudaStream_t stream) {
  const Format f = p.w4_13.format;
  const bool row = p.gather.quant == Fp8Quant::ROW;
  const bool w4a4 = p.gather.quant == Fp8Quant::NVFP4;
  if (f == Format::W4A8_INT4) launch_cooperative<decode_layer_w4_kernel<kInt4, kU, kFp8Row>>(p, cols, smem, stream);
  else if (f == Format::MXFP4 && row)
    launch_cooperative<decode_layer_w4_kernel<kMx, kU, kFp8Row>>(p, cols, smem, stream);
  else if (f == Format::MXFP4)
    launch_cooperative<decode_layer_w4_kernel<kMx, kU, kBf16>>(p, cols, smem, stream);
  else if (w4a4)
    launch_cooperative<decode_layer_w4_kernel<kNv, kU, kNvfp4>>(p, cols, smem, stream);
  else  // (nvfp4 has no fp8 activations)
    launch_cooperative<decode_layer_w4_kernel<kNv, kU, kBf16>>(p, cols, smem, stream);
}

}  // namespace

int64_t decode_layer_w4_cols(int64_t K, int sm_count) {
  if (sm_count <= 0) return 0;
  const int64_t per = (K + sm_count - 1) / sm_count;
  return (per + 7) / 8 * 8;  // whole 16-byte runs of bias; one MMA row block may be half used
}

int64_t decode_layer_w4_smem_bytes(const DecodeLayerParams& p) {
  // W2 slices (packed), their block scales, x (16-bit), the GEMM2 bias of the columns (fp32);
  // fp8 activations: GEMM2's operand rows (16-bit).
  const int64_t K = p.gather.K, N = p.act.N, topk = p.gather.topk;
  const int64_t cols = decode_layer_w4_cols(K, p.sm_count);
  const bool staged = p.gather.quant == Fp8Quant::ROW || p.gather.quant == Fp8Quant::NVFP4;
  const int64_t x_rows = p.gather.quant == Fp8Quant::NVFP4 ? topk : 1;  // W4A4: x per slot
  return topk * cols * (N / 2) + round16(topk * cols * scale_row_bytes(p.w4_2.format, N)) + 2 * K * x_rows +
         topk * cols * 4 + (staged ? topk * N * 2 : 0);
}

bool decode_layer_w4_applies(const DecodeLayerParams& p) {
  const GatherParams& gp = p.gather;
  const ActivationParams& ap = p.act;
  const FinalizeParams& fp = p.fin;
  if (!p.w4) return false;
  const Format f = p.w4_13.format;
  if ((f != Format::MXFP4 && f != Format::NVFP4 && f != Format::W4A8_INT4) || p.w4_2.format != f) return false;
  // MXFP4 / NVFP4 with 16-bit activations (bf16 operands, no quantisation, GENERIC factors without
  // activation scales), MXFP4 with per-token fp8 activations (ROW: the GENERIC row factor is the
  // kernel's own scale), W4A8 (fp16 operands, ROW), NVFP4 with NVFP4 activations (W4A4: per-expert
  // input scales, a_expert).
  const bool row = gp.quant == Fp8Quant::ROW, w4a4 = gp.quant == Fp8Quant::NVFP4;
  const Operand op = f == Format::W4A8_INT4 ? Operand::FP16 : Operand::BF16;
  if (gp.op != op || ap.op != op || ap.quant != gp.quant) return false;
  if (!row && !w4a4 && (gp.quant != Fp8Quant::NONE || f == Format::W4A8_INT4)) return false;
  if (row && f == Format::NVFP4) return false;  // no such format (validate.cpp); no kernel instance
  if (w4a4 && (f != Format::NVFP4 || !gp.nvfp4_input_scale || !ap.nvfp4_input_scale)) return false;
  // W4A4 keeps x per slot in shared memory: with gpt-oss-120b's 197 KB the kernel was 1.08-1.10x
  // the chain's time (L1 28 KB for the block-scale loads), with Qwen3-30B-A3B's 101 KB 0.91x (H100,
  // bench/results/2026-11-26-h100-decode-layer-w4 r11): taken up to 128 KB. The same for per-token
  // fp8 activations (GEMM2's operand rows staged in shared memory): gpt-oss-120b mxfp4-fp8 (176 KB)
  // 1.16x the chain's time since the chain's 2026-11-28 gains, Qwen3-30B-A3B's (69 KB) 0.87x (H200,
  // bench/results/2026-11-28-h200-w4-early, dl). The bf16-activation forms stay at any size
  // (gpt-oss-120b mxfp4 153 KB: 0.99x, nvfp4 0.82x).
  if ((w4a4 || row) && decode_layer_w4_smem_bytes(p) > 128 * 1024) return false;
  for (const Dequant* d : {&ap.dq, &fp.dq})
    if (d->kind != Dequant::GENERIC || (!row && d->a_row) || (!w4a4 && d->a_expert) || (w4a4 && !d->a_expert))
      return false;
  if ((row || w4a4) && (!p.stage || !aligned16(p.stage))) return false;
  if (f == Format::W4A8_INT4 && (gp.K % 128 != 0 || ap.N % 128 != 0 || p.w4_13.swizzled)) return false;
  if (fp.M != 1 || gp.topk < 1 || gp.topk > kDecodeLayerMaxTopk || fp.topk != gp.topk) return false;
  if (gp.on_input || fp.on_input) return false;
  if (gp.x_dtype != DType::F32 && gp.x_dtype != DType::F16 && gp.x_dtype != DType::BF16) return false;
  if (ap.act == Activation::RELU2 || ap.R != 2 * ap.N || ap.N <= 0) return false;
  const int64_t K = gp.K, N = ap.N;
  if (K <= 0 || K % 32 != 0 || N % 32 != 0 || fp.K != K) return false;
  if (p.w4_13.n != ap.R || p.w4_13.k != K || p.w4_2.n != K || p.w4_2.k != N) return false;
  if (!p.w4_13.w || !p.w4_2.w || !p.w4_13.scale || !p.w4_2.scale) return false;
  if (!aligned16(gp.x) || !aligned16(p.w4_13.w) || !aligned16(p.w4_2.w) || !aligned16(ap.out) || !aligned16(fp.bias))
    return false;
  if (p.sm_count <= 0 || (decode_layer_w4_cols(K, p.sm_count) + 15) / 16 * 16 > kMaxW4Cols) return false;
  return decode_layer_w4_smem_bytes(p) <= kMaxDynSmem;
}

void launch_decode_layer_w4(const DecodeLayerParams& p, cudaStream_t stream) {
  if (!decode_layer_w4_applies(p))
    throw Error("one-token 4-bit layer kernel: the call is not one decode_layer_w4_applies() accepts (K = " +
                std::to_string(p.gather.K) + ", N = " + std::to_string(p.act.N) + ", topk " +
                std::to_string(p.gather.topk) + ", M " + std::to_string(p.fin.M) + ")");
  const int64_t cols = decode_layer_w4_cols(p.gather.K, p.sm_count), smem = decode_layer_w4_smem_bytes(p);
  const int64_t kblocks = (p.gather.K + kKBlockValues - 1) / kKBlockValues, u = (kblocks + kHalfWarps - 1) / kHalfWarps;
  DecodeLayerParams q = p;
  q.half_major_tasks = dl_half_major_tasks();
  static const bool nvfp4_unrolled = !env_switch_is_zero("FUSEDMOE_DL_NVFP4_UNROLLED");
  q.nvfp4_unrolled = nvfp4_unrolled;
  if (u <= 2) launch_w4<2>(q, cols, smem, stream);
  else if (u == 3) launch_w4<3>(q, cols, smem, stream);
  else launch_w4<4>(q, cols, smem, stream);
}

}  // namespace fusedmoe::cuda
