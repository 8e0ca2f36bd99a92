// The expert layer of one token in one kernel (the chain it replaces: plan + gather, GEMM1 +
// activation, GEMM2 + finalize; measured in src/cuda/NOTES.md, "One-token layer in one kernel").
//
// At one token a layer reads a few tens of MB of weights (Qwen3-30B-A3B fp8: 8 experts x 4.7 MB)
// and each kernel of the chain lasts 10-20 us, of which its start (launch, expert lookup, first
// loads) and its drain are a large part; the GEMM2 kernel cannot start reading its weights before
// GEMM1 has finished (ncu: every kernel of the chain at 0.9-1.8 TB/s,
// bench/results/2026-11-26-decode-profile). Here one cooperative grid (one CTA per SM) does:
//  1. each CTA quantises x into shared memory as the gather does and reads the token's ids and
//     router weights (no plan);
//  2. GEMM1 + activation over (slot, block of 8 outputs) tasks, two tasks at a time per CTA (two
//     halves of 8 warps): the MMA kernel of small_m_activation.cu (mma.sync, the block's rows g /
//     g + 8 the gate / up rows of output g, warps split k, their sums added in warp order), the
//     activation and its rounding, then either its static fp8 quantisation (ActivationRowStore)
//     into a [topk, N] operand or, where the scale needs other tasks' outputs (fp8-block,
//     fp8-channel, dynamic fp8-tensor), an fp32 staging row; after its first task, thread 0
//     issues bulk copies of the CTA's W2 slice (the W2 rows of its output columns for every slot,
//     and their bias) into shared memory;
//  3. a grid-wide barrier (cooperative_groups; the operand rows are written by other CTAs); the
//     staged modes then quantise every slot's row in every CTA (no second barrier);
//  4. GEMM2 for the CTA's columns from the W2 slices already in shared memory (mma.sync against
//     each slot's operand row), then the top-k sum in slot order with finalize's add_slot terms.
// So GEMM2's weights stream from HBM while GEMM1 runs, and the layer pays one start and one
// drain. Sums are in the MMA's order (deterministic; within rounding of the chain's kernels).
// Where its time goes (globaltimer stamps per CTA, H100, Qwen3-30B-A3B static fp8-tensor, L2
// flushed): start (x, ids) ~2 us, GEMM1 ~17 us (load rounds of 64 KB per SM in flight, ~2.2 TB/s
// with the W2 copies), barrier ~1.4 us, GEMM2 ~2 us - more than its instructions explain, as long
// on a second pass, not the F2FP rate (NOTES.md; wgmma GEMMs and other tail changes measured and
// rejected, bench/results/2026-11-27-h100-decode-tail) - then the top-k sum (topk_sum_store: a
// warp per slot since the ~1.5 us of one warp walking the slots).
#include <cooperative_groups.h>
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
#include "fusedmoe/error.hpp"

namespace fusedmoe::cuda {
namespace {

using namespace decode_layer;
using small_m::kKBlockBytes;
using small_m::load16_stream;
using small_m::mma_kblock;

// GEMM1's k loop: 128-byte units of a weight row (8 lanes x 16 bytes), kUnits per lane in flight
// (x 2 passes x gate / up: 8 loads of 16 bytes per lane, as before the row-contiguous mapping).
constexpr int kUnitBytes = 128;
constexpr int kUnits = 2;
constexpr int kMaxKGroups = 64;            // fp8-block: 128-wide groups of x (K <= 8192)
constexpr int kMaxNGroups = 32;            // fp8-block: 128-wide groups of GEMM2's operand (N <= 4096)

// The e4m3 codes of chunk l with a row scale (quant_row) or a tensor scale (quant_tensor).
__device__ __forceinline__ void store_row_codes8(uint8_t* out, int l, const float (&v)[8], float s) {
  const uint4 codes = pack8_row_codes(Operand::FP8, v, s);
  *reinterpret_cast<uint2*>(out + static_cast<int64_t>(l) * 8) = make_uint2(codes.x, codes.y);
}
__device__ __forceinline__ void store_tensor_codes8(uint8_t* out, int l, const float (&v)[8], float s) {
  uint8_t q[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) q[j] = quant_tensor(v[j], s);
  *reinterpret_cast<uint2*>(out + static_cast<int64_t>(l) * 8) =
      make_uint2(pack4_e4m3(q[0], q[1], q[2], q[3]), pack4_e4m3(q[4], q[5], q[6], q[7]));
}

// The kernel's quantisation modes: fp8-tensor with static scales, fp8-block, fp8-channel
// (per-token dynamic activation scales, per-channel weight scales), fp8-tensor with dynamic scales.
enum Mode : int { kTensorMode = 0, kBlockMode = 1, kChannelMode = 2, kDynTensorMode = 3 };

// kBlock: fp8-block (1 x 128 activation groups, 128 x 128 weight blocks; DeepSeek-V3 recipe): x
// quantised per 128-wide group; each 128-wide k group's MMA sums promoted with a_scale * w_scale
// (as the blockwise GEMM and small_m_dot.cuh's fma_pass); the activation output goes to an fp32
// staging row and every CTA quantises the slots' rows in 1 x 128 groups after the grid barrier
// (the group amax spans 16 tasks), into shared memory, for GEMM2 with its own block scales.
// kChannel: fp8-channel: x quantised with its row's scale (amax / 448); GEMM1's sums times
// x-scale * w-scale[column]; the activation staged in fp32 and every slot's row quantised with its
// own amax after the grid barrier (as the activation kernel's ROW case); GEMM2's sums times the
// slot's scale * w-scale[column] in the top-k sum (finalize's CHANNEL term).
// kDyn: fp8-tensor with dynamic scales: x quantised with amax(x) / 448 (one token: the tensor is
// its row); the activation staged and all slots' rows quantised with one scale from their common
// amax after the grid barrier (the activation kernel's TENSOR_DYNAMIC case).
template <int kMode>
__global__ void __launch_bounds__(kThreads, 1) decode_layer_kernel(DecodeLayerParams p, int64_t cols) {
  chain_wait();
  constexpr bool kBlock = kMode == kBlockMode, kChannel = kMode == kChannelMode, kDyn = kMode == kDynTensorMode;
  constexpr bool kStaged = kBlock || kChannel || kDyn;  // activation staged, GEMM2 operand in shared memory
  constexpr Operand OP = Operand::FP8;
  constexpr int kBytes = 1;
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ __align__(8) uint64_t w2_bar;
  __shared__ __align__(8) uint64_t a2_bar;  // static fp8-tensor: the GEMM2 operand rows' bulk copy
  __shared__ int32_t expert[kMaxSlots];
  __shared__ float weight[kMaxSlots], factor[kMaxSlots];
  __shared__ float a1_tensor, a2_tensor, act_s2;
  __shared__ float part[kHalves][2][kHalfWarps][2][kOuts];  // each warp's gate / up sums, by task parity
  __shared__ float ys[4][kMaxSlots][kMaxCols];              // GEMM2 sums of the CTA's columns, by k part
  __shared__ float xsc[kBlock ? kMaxKGroups : 1];            // fp8-block: x's group scales
  __shared__ float sa2[kStaged ? kMaxSlots : 1][kBlock ? kMaxNGroups : 1];  // GEMM2 operand scales (staged modes)
  __shared__ float x_scale;  // fp8-channel: x's row scale; dynamic fp8-tensor: x's tensor scale

  const int topk = static_cast<int>(p.gather.topk);
  const int64_t K = p.gather.K, N = p.act.N;
  const int64_t x_row = K * kBytes, w2_row = N * kBytes;  // both multiples of 16 bytes
  uint8_t* w2s = smem;                                     // [topk][cols][w2_row]
  uint8_t* xs = w2s + topk * cols * w2_row;               // [x_row] GEMM1 operand
  float* bias2 = reinterpret_cast<float*>(xs + x_row);     // [topk][cols] GEMM2 bias of the columns
  float* wc2 = bias2 + topk * cols;                        // fp8-channel: [topk][cols] W2 column scales
  uint8_t* a2s = reinterpret_cast<uint8_t*>(wc2 + (kChannel ? topk * cols : 0));  // [topk][w2_row] GEMM2 operand
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * cols;
  const int64_t ncols = K - c0 < 0 ? 0 : (K - c0 < cols ? K - c0 : cols);

  // ---- 1. x, slots, W2 slices ----
  // The slots' ids and router weights are loaded first, into registers, and used after x: the
  // ids head the longest chain of loads (id -> map entry -> weights), and loaded after x's
  // quantisation they waited for it (two DRAM round trips before GEMM1's first load, ~2.2 us).
  // Nothing here branches on them before x's loads are issued.
  const int32_t slot_id = tid < topk ? p.ids[tid] : -1;
  const float slot_weight = tid < topk ? p.fin.topk_weights[tid] : 0.0f;
  // The last warp does not quantise x: it turns the ids of the CTA's first two tasks into their
  // first GEMM1 load round (16 weight rows x kHalfWarps x kUnits 128-byte units per task) and
  // prefetches those lines into L2 while the other warps quantise x, so the first weight reads
  // do not start only after x's barrier (where the launcher asks: fp8-channel, see dl_prefetch_on).
  // fp8-channel only (the launcher's rule): the other modes keep every warp on x.
  const bool prefetch = kChannel && p.prefetch_first_round;
  const bool prefetcher = prefetch && warp == kWarps - 1;
  const int qthreads = prefetch ? kThreads - 32 : kThreads;  // threads that quantise x
  if (prefetcher) {
    const int64_t blocks = (N + kOuts - 1) / kOuts, tasks = topk * blocks;
    const uint8_t* w13 = static_cast<const uint8_t*>(p.w13);
    const int64_t units = (x_row + kUnitBytes - 1) / kUnitBytes;
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      const int64_t task = first_task(p, h);
      if (task >= tasks) break;
      const int sl = static_cast<int>(task / blocks);
      const int64_t ob = task % blocks;
      const int32_t e = local_expert_of(p.ids[sl], p.expert_map, p.num_experts, p.num_global);
      if (e < 0) continue;
      // Lane l: row l % 16 (gate rows 0-7, up rows 8-15 of the task's 8 outputs), units l / 16 + 2 i.
      const int64_t n = ob * kOuts + (lane & 7);
      if (n >= N) continue;
      int64_t gi = 0, ui = 0;
      gate_up_columns(p.act, n, gi, ui);
      const uint8_t* row = w13 + (static_cast<int64_t>(e) * p.act.R + ((lane & 8) ? ui : gi)) * x_row;
      for (int64_t kb = lane >> 4; kb < units && kb < kHalfWarps * kUnits; kb += 2)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(row + kb * kUnitBytes));
    }
  }
  if constexpr (kBlock) {
    // As the gather's vector quantiser (quantise_block_row): the same codes and scales.
    quantise_block_lanes(
        static_cast<int>(K / 8), p.gather.block.ue8m0,
        [&](int l, float (&v)[8]) { load8_as_float(p.gather.x, p.gather.x_dtype, static_cast<int64_t>(l) * 8, v); },
        [&](int l, uint2 codes, float sc) {
          *reinterpret_cast<uint2*>(xs + static_cast<int64_t>(l) * 8) = codes;
          if ((l & 15) == 0) xsc[l / 16] = sc;
        });
  } else {
    // Static fp8-tensor: the vector gather's codes with the static scale. fp8-channel and dynamic
    // fp8-tensor: the row's amax first (the gather's ROW case, gather_row_vec_rows; or
    // launch_gemm1_amax, the tensor being this one row), then the codes with its scale.
    const int lanes = static_cast<int>(K / 8);
    float s1;
    if constexpr (kChannel || kDyn) {
      float m = 0.0f;
      for (int l = prefetcher ? lanes : tid; l < lanes; l += qthreads) {
        float v[8];
        load8_as_float(p.gather.x, p.gather.x_dtype, static_cast<int64_t>(l) * 8, v);
        m = fmaxf(m, amax8(v));
      }
      s1 = scale_from_amax(block_max(m));
      if (tid == 0) x_scale = s1;
    } else {
      s1 = tensor_scale_value(p.gather.scale);
    }
    for (int l = prefetcher ? lanes : tid; l < lanes; l += qthreads) {
      float v[8];
      load8_as_float(p.gather.x, p.gather.x_dtype, static_cast<int64_t>(l) * 8, v);
      if constexpr (kChannel) store_row_codes8(xs, l, v, s1);
      else store_tensor_codes8(xs, l, v, s1);
    }
  }
  // Per slot: the expert and the router weight. GEMM1's per-expert scales are read by the task
  // epilogues (loaded with the task's weights). The slot's W2 tensor scale (finalize's
  // slot_factor) is loaded here, as soon as its expert is known, and used after GEMM1: loaded right
  // before the grid barrier, every CTA waited a DRAM round trip there.
  float w2t = 1.0f;
  if (tid < topk) {
    const int32_t e = local_expert_of(slot_id, p.expert_map, p.num_experts, p.num_global);
    expert[tid] = e;
    weight[tid] = slot_weight;
    if (e >= 0 && p.fin.dq.kind == Dequant::TENSOR) w2t = p.fin.dq.w[e];
  }
  if (!kDyn && tid == 32) {  // the static per-tensor scales (another warp: no wait behind the ids)
    a1_tensor = p.act.dq.kind == Dequant::TENSOR ? tensor_scale_value(p.act.dq.a_tensor) : 1.0f;
    a2_tensor = p.fin.dq.kind == Dequant::TENSOR ? tensor_scale_value(p.fin.dq.a_tensor) : 1.0f;
    act_s2 = kStaged ? 1.0f : tensor_scale_value(p.act.scale);
  }
  if (tid == 0) {
    mbar_init(&w2_bar, 1);
    mbar_init(&a2_bar, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  // The W2 rows and the GEMM2 bias of the CTA's columns, for every slot with an expert: issued by
  // thread 0 once its half has consumed its first GEMM1 task's weights, not at the start. GEMM1
  // is a chain of load rounds (latency-bound); the slices are needed only after the grid barrier.
  // Issued first, they sat in the HBM queue ahead of GEMM1's loads: same-binary A/B (H100,
  // bench/results/2026-11-26-h100-decode-layer) DeepSeek-V3 TP8 one token 34.1 us at the start,
  // 30.7 us after the first task; Qwen3-30B-A3B 29.3 / 29.9 us.
  auto issue_w2 = [&]() {
    const uint32_t w_bytes = static_cast<uint32_t>(ncols * w2_row), b_bytes = static_cast<uint32_t>(ncols * 4);
    uint32_t bytes = 0;
    for (int s = 0; s < topk; ++s)
      if (expert[s] >= 0) bytes += w_bytes + (p.fin.bias ? b_bytes : 0u) + (kChannel ? b_bytes : 0u);
    mbar_expect_tx(&w2_bar, bytes);  // the arrive; with no bytes the phase completes here
    const uint8_t* w2 = static_cast<const uint8_t*>(p.w2);
    for (int s = 0; s < topk && ncols > 0; ++s) {
      const int64_t e = expert[s];
      if (e < 0) continue;
      bulk_load_1d(w2s + s * cols * w2_row, w2 + (e * K + c0) * w2_row, w_bytes, &w2_bar);
      if (p.fin.bias) bulk_load_1d(bias2 + s * cols, p.fin.bias + e * K + c0, b_bytes, &w2_bar);
      if (kChannel) bulk_load_1d(wc2 + s * cols, p.fin.dq.w + e * K + c0, b_bytes, &w2_bar);
    }
  };
  bool w2_issued = false;

  // ---- 2. GEMM1 + activation: tasks (slot, 8 outputs), one per CTA half at a time ----
  // One half barrier per task: the warps' partial sums go to part[task parity], and the task's
  // epilogue warp (rotating) sums them and stores the outputs while the other warps already load
  // the next task; the next barrier orders that read before the buffer's reuse two tasks later.
  {
    const ActivationParams& ap = p.act;
    const int half = warp / kHalfWarps, hw = warp % kHalfWarps;
    const int64_t blocks = (N + kOuts - 1) / kOuts, tasks = topk * blocks;
    const uint8_t* w13 = static_cast<const uint8_t*>(p.w13);
    int it = 0;
    for (int64_t task = first_task(p, half); task < tasks;
         task += static_cast<int64_t>(gridDim.x) * kHalves) {
      const int s = static_cast<int>(task / blocks);
      const int64_t ob = task % blocks;
      const int e = expert[s];
      if (e < 0) continue;  // the same for every warp of the half
      const int buf = it & 1;
      const bool epi = hw == (it % kHalfWarps) && lane < kOuts;  // this task's epilogue lanes
      ++it;
      // The epilogue's inputs other than the sums, loaded before the weights so they arrive with them.
      const int64_t ne = ob * kOuts + lane;
      int64_t ge = 0, ue = 0;
      float bg = 0.0f, bu = 0.0f, ws = 1.0f, wcg = 1.0f, wcu = 1.0f;
      if (epi && ne < N) {
        gate_up_columns(ap, ne, ge, ue);
        const int64_t er = static_cast<int64_t>(e) * ap.R;  // expert e's first GEMM1 column
        if (ap.bias) bg = ap.bias[er + ge], bu = ap.bias[er + ue];
        if (ap.dq.kind == Dequant::TENSOR) ws = ap.dq.w[e];
        if constexpr (kChannel) wcg = ap.dq.w[er + ge], wcu = ap.dq.w[er + ue];
      }
      // Row-contiguous weight loads: one warp load covers 4 weight rows x 128 bytes (8 lanes per
      // row), not 8 rows x 64 bytes (4 lanes per row: the MMA fragment's own rows), so each load
      // requests 4 whole lines instead of 8 half lines (a flat-stream probe put ~1.2 us of the
      // layer's ~27 on that, bench/results/2026-11-27-h100-decode-stream-probe; the layer gained
      // 0.1-0.3 us, bench/results/2026-11-27-h100-decode-rowload). A task's 8 outputs take two passes of
      // 4 (p = 0, 1: outputs ob * 8 + 4 p + r). Lane l reads bytes 16 q (q = l & 7) of every
      // 128-byte k unit of row r = l >> 3, so the fragment rows 2r and 2r + 1 (lanes 8r .. 8r + 7)
      // hold the first and the second 64 bytes of the unit of weight row r; lane (g, t) reads x at
      // the same 16 q = 64 (g & 1) + 16 t, which puts x's first / second 64 bytes in the B
      // operand's columns 0 / 1: C[2r][0] + C[2r + 1][1] is row r's sum (k split over two fragment
      // rows; the other C entries are not used). Gate rows are the fragment's rows 0-7, up rows 8-15.
      const int r = lane >> 3, q = lane & 7;
      const uint8_t* wgp[2];
      const uint8_t* wup[2];
      bool okp[2];
#pragma unroll
      for (int pp = 0; pp < 2; ++pp) {
        const int64_t n = ob * kOuts + 4 * pp + r;
        okp[pp] = n < N;
        int64_t gi = 0, ui = 0;
        if (okp[pp]) gate_up_columns(ap, n, gi, ui);
        wgp[pp] = w13 + (static_cast<int64_t>(e) * ap.R + gi) * x_row + 16 * q;
        wup[pp] = w13 + (static_cast<int64_t>(e) * ap.R + ui) * x_row + 16 * q;
      }
      float c[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
      // fp8-block: the gate / up rows' 128 x 128 weight scales of each k group (all 8 outputs of a
      // task lie in one 128-row block of each half); a 128-byte unit is one group.
      const float* swg = nullptr;
      const float* swu = nullptr;
      if constexpr (kBlock) {
        const int64_t kg = K / 128;
        const int64_t n0 = ob * kOuts < N ? ob * kOuts : 0;
        int64_t gi0 = 0, ui0 = 0;
        gate_up_columns(ap, n0, gi0, ui0);
        swg = p.w13_scale + (static_cast<int64_t>(e) * (ap.R / 128) + gi0 / 128) * kg;
        swu = p.w13_scale + (static_cast<int64_t>(e) * (ap.R / 128) + ui0 / 128) * kg;
      }
      const int64_t units = (x_row + kUnitBytes - 1) / kUnitBytes;
      for (int64_t kb = static_cast<int64_t>(hw) * kUnits; kb < units; kb += kHalfWarps * kUnits) {
        uint4 wl[2][kUnits], wh[2][kUnits], xv[kUnits];
#pragma unroll
        for (int u = 0; u < kUnits; ++u) {
          const int64_t off = (kb + u) * kUnitBytes;
          const bool in = kb + u < units && off + 16 * q < x_row;
#pragma unroll
          for (int pp = 0; pp < 2; ++pp) {
            wl[pp][u] = load16_stream(wgp[pp] + off, in && okp[pp]);
            wh[pp][u] = load16_stream(wup[pp] + off, in && okp[pp]);
          }
          xv[u] = in ? ld_shared16(xs + off + 16 * q) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < kUnits; ++u) {
          if (kb + u >= units) break;
          if constexpr (kBlock) {
            // Each 128-wide group's sums from zero, added times a_scale * w_scale (both halves of
            // a row's unit with the same group scale).
            const int64_t grp = kb + u;
            const float sg = __fmul_rn(xsc[grp], __ldg(swg + grp)), su = __fmul_rn(xsc[grp], __ldg(swu + grp));
#pragma unroll
            for (int pp = 0; pp < 2; ++pp) {
              float cb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
              mma_kblock<OP>(cb, wl[pp][u], wh[pp][u], xv[u]);
              c[pp][0] = fmaf(cb[0], sg, c[pp][0]);
              c[pp][1] = fmaf(cb[1], sg, c[pp][1]);
              c[pp][2] = fmaf(cb[2], su, c[pp][2]);
              c[pp][3] = fmaf(cb[3], su, c[pp][3]);
            }
          } else {
#pragma unroll
            for (int pp = 0; pp < 2; ++pp) mma_kblock<OP>(c[pp], wl[pp][u], wh[pp][u], xv[u]);
          }
        }
      }
      if (tid == 0 && !w2_issued) {  // after the first task's weight loads (see issue_w2)
        issue_w2();
        w2_issued = true;
      }
      // Row r of pass pp: gate C[2r][0] (lane 8r's c[0]) + C[2r + 1][1] (lane 8r + 4's c[1]); up
      // likewise from c[2] / c[3] (fragment rows 2r + 8, 2r + 9).
#pragma unroll
      for (int pp = 0; pp < 2; ++pp) {
        const float g1 = __shfl_down_sync(0xffffffffu, c[pp][1], 4);
        const float u1 = __shfl_down_sync(0xffffffffu, c[pp][3], 4);
        if (q == 0) {
          part[half][buf][hw][0][4 * pp + r] = c[pp][0] + g1;
          part[half][buf][hw][1][4 * pp + r] = c[pp][2] + u1;
        }
      }
      half_barrier(half);
      if (epi && ne < N) {
        float gate, up;
        sum_task_parts(part[half][buf], lane, gate, up);
        // ActivationRowStore::make's factor, from the scales loaded above (dynamic fp8-tensor: x's
        // scale from this kernel); fp8-channel dequantises per column first, as fix_h:
        // v * (a_row * w[e, column]).
        ActivationRowStore st;
        st.ds = __fmul_rn(kDyn ? x_scale : a1_tensor, ws);
        st.s = act_s2;
        st.scaled = ap.dq.kind == Dequant::TENSOR;
        st.fp8 = true;
        if constexpr (kChannel) {
          gate = __fmul_rn(gate, __fmul_rn(x_scale, wcg));
          up = __fmul_rn(up, __fmul_rn(x_scale, wcu));
        }
        // Staged modes: the rounded activation in fp32 (its quantisation needs other tasks'
        // outputs: a 1 x 128 group, a row or the tensor); else quantised with the static scale.
        if constexpr (kStaged) p.stage[s * N + ne] = st.value(ap, gate, up, bg, bu);
        else st.store(ap, s, ne, gate, up, bg, bu);
      }
    }
  }

  if (tid == 0 && !w2_issued) issue_w2();
  // ---- 3. every slot's operand row is complete ----
  // GEMM2's per-slot dequant factors (finalize's slot_factor, from the W2 scale loaded at the
  // start; fp8-channel and dynamic: set below).
  float f2 = 1.0f;
  if (!kDyn && tid < topk && expert[tid] >= 0 && p.fin.dq.kind == Dequant::TENSOR) f2 = __fmul_rn(a2_tensor, w2t);
  __syncthreads();
  cooperative_groups::this_grid().sync();
  if (!kChannel && !kDyn && tid < topk) factor[tid] = f2;  // fp8-channel, dynamic: below
  if constexpr (kBlock) {
    // Every slot's staged row quantised in 1 x 128 groups (as the activation kernel's block
    // quantiser), codes and scales into shared memory; rows of slots without an expert are zeros.
    const int lanes_per_row = static_cast<int>(N / 8);
    quantise_block_lanes(
        topk * lanes_per_row, p.act.block.ue8m0,
        [&](int l, float (&v)[8]) {
          load_staged8(reinterpret_cast<const float4*>(p.stage), l, expert[l / lanes_per_row] >= 0, v);
        },
        [&](int l, uint2 codes, float sc) {
          *reinterpret_cast<uint2*>(a2s + static_cast<int64_t>(l) * 8) = codes;
          const int s = l / lanes_per_row, ll = l % lanes_per_row;
          if ((ll & 15) == 0) sa2[s][ll / 16] = sc;
        });
    __syncthreads();
  } else if constexpr (kChannel) {
    // Every slot's staged row quantised with its own scale (the activation kernel's ROW case): one
    // warp per slot; the first kHeld chunks of 8 per lane stay in registers between the amax and
    // the codes (one L2 round trip for rows of N <= 1024), longer rows read the rest twice. The
    // scale is the slot's factor.
    const int lanes_per_row = static_cast<int>(N / 8);
    for (int s = warp; s < topk; s += kWarps) {
      if (expert[s] < 0) continue;
      const float4* row = reinterpret_cast<const float4*>(p.stage + static_cast<int64_t>(s) * N);
      uint8_t* out = a2s + static_cast<int64_t>(s) * w2_row;
      const float s2 = quantise_staged_row(
          row, lanes_per_row, lane, [&](int l, const float (&v)[8], float sc) { store_row_codes8(out, l, v, sc); });
      if (lane == 0) factor[s] = s2;
    }
    __syncthreads();
  } else if constexpr (kDyn) {
    // All slots' staged rows with one scale from their common amax (quantise_staged_kernel's
    // codes); the slots' factors are that scale times their expert's W2 scale. As above, the
    // first kHeld chunks of 8 per thread stay in registers.
    const int lanes_per_row = static_cast<int>(N / 8), lanes = topk * lanes_per_row;
    const float4* rows = reinterpret_cast<const float4*>(p.stage);
    auto used = [&](int l) { return l < lanes && expert[l / lanes_per_row] >= 0; };
    float v[kHeld][8];
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < kHeld; ++i) {
      const int l = tid + kThreads * i;
      load_staged8(rows, l, used(l), v[i]);
      m = fmaxf(m, amax8(v[i]));
    }
    for (int l = tid + kThreads * kHeld; l < lanes; l += kThreads) {
      float w[8];
      load_staged8(rows, l, used(l), w);
      m = fmaxf(m, amax8(w));
    }
    const float s2 = scale_from_amax(block_max(m));
#pragma unroll
    for (int i = 0; i < kHeld; ++i) {
      const int l = tid + kThreads * i;
      if (used(l)) store_tensor_codes8(a2s, l, v[i], s2);
    }
    for (int l = tid + kThreads * kHeld; l < lanes; l += kThreads) {
      if (!used(l)) continue;
      float w[8];
      load_staged8(rows, l, true, w);
      store_tensor_codes8(a2s, l, w, s2);
    }
    if (tid < topk) factor[tid] = __fmul_rn(s2, w2t);  // slot_factor: a_tensor * w[e]
    __syncthreads();
  }

  if constexpr (!kStaged) {
    // Every slot's operand row (written by the GEMM1 epilogues of all CTAs, at L2 after the
    // barrier) into shared memory with one bulk copy: one L2 round trip before GEMM2 instead of
    // one per step of each warp's k loop. Rows of slots without an expert are copied unused.
    if (tid == 0 && ncols > 0) {
      asm volatile("fence.proxy.async.global;" ::: "memory");  // the generic-proxy stores, to the copy
      const uint32_t bytes = static_cast<uint32_t>(topk * w2_row);
      mbar_expect_tx(&a2_bar, bytes);
      bulk_load_1d(a2s, p.act.out, bytes, &a2_bar);
    }
  }

  // ---- 4. GEMM2 of the CTA's columns from shared memory, then the top-k sum ----
  // Units (slot, 16-column block, k part): all 16 warps busy where slots x blocks < 16 (Qwen3: 8
  // units of 12 k-blocks -> 16 of 6). Each warp keeps two accumulator sets (even / odd k-blocks)
  // to halve the MMA dependency chain; the sums meet in a fixed order below.
  if (ncols > 0) {
    mbar_wait(&w2_bar, 0);
    if constexpr (!kStaged) mbar_wait(&a2_bar, 0);
    const int64_t qs = (ncols + 15) / 16;  // 16-column MMA row blocks
    const int64_t kblocks = (w2_row + kKBlockBytes - 1) / kKBlockBytes;
    const int pairs = topk * static_cast<int>(qs);
    const int kparts = pairs * 4 <= kWarps ? 4 : pairs * 2 <= kWarps ? 2 : 1;
    // 32-bit unit arithmetic: the 64-bit divisions' subroutine calls were ~20% of GEMM2's samples
    for (int unit = warp; unit < pairs * kparts; unit += kWarps) {
      const int pair = unit / kparts, kp = unit - pair * kparts;
      const int s = pair / static_cast<int>(qs);
      const int q = pair - s * static_cast<int>(qs);
      if (expert[s] < 0) continue;
      // Rows past ncols (the last CTA's partial block) read this slot's unused slice rows; their
      // sums are not used.
      const uint8_t* wlo = w2s + (s * cols + q * 16 + g) * w2_row + 16 * t;
      const uint8_t* whi = wlo + 8 * w2_row;
      float c[2][4] = {};
      const float* sw2 = nullptr;  // fp8-block: the 128 x 128 scales of these 16 columns' row block
      if constexpr (kBlock) sw2 = p.w2_scale + (expert[s] * (K / 128) + (c0 + q * 16) / 128) * (N / 128);
      // Compact code (2 k-blocks per step, no unrolled tail): this part runs once per CTA, so its
      // instructions are fetched cold (measured: the tail cost more than its arithmetic). A step
      // of 2 k-blocks is one 128-wide group of fp8-block.
#pragma unroll 1
      for (int64_t kb = kp * 2; kb < kblocks; kb += kparts * 2) {
        uint4 wl[2], wh[2], xv[2];
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int64_t off = (kb + u) * kKBlockBytes;
          const bool in = kb + u < kblocks && off + 16 * t < w2_row;
          wl[u] = in ? ld_shared16(wlo + off) : make_uint4(0, 0, 0, 0);
          wh[u] = in ? ld_shared16(whi + off) : make_uint4(0, 0, 0, 0);
          xv[u] = in ? ld_shared16(a2s + s * w2_row + 16 * t + off) : make_uint4(0, 0, 0, 0);
        }
        if constexpr (kBlock) {
          float cb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
          for (int u = 0; u < 2; ++u) mma_kblock<OP>(cb, wl[u], wh[u], xv[u]);
          const float sc = __fmul_rn(sa2[s][kb >> 1], __ldg(sw2 + (kb >> 1)));
          c[0][0] = fmaf(cb[0], sc, c[0][0]);
          c[0][2] = fmaf(cb[2], sc, c[0][2]);
        } else {
#pragma unroll
          for (int u = 0; u < 2; ++u) mma_kblock<OP>(c[u], wl[u], wh[u], xv[u]);
        }
      }
      if (t == 0) {
        ys[kp][s][q * 16 + g] = c[0][0] + c[1][0];
        ys[kp][s][q * 16 + g + 8] = c[0][2] + c[1][2];
      }
    }
    __syncthreads();
    topk_sum_store(p.fin, ys, kparts, expert, weight, factor, p.fin.bias ? bias2 : nullptr, kChannel ? wc2 : nullptr,
                   topk, static_cast<int>(cols), static_cast<int>(ncols), c0);
  }
  __syncthreads();
}

// The first-round prefetch (the kernel's `prefetcher` warp) is taken for fp8-channel only. Same-binary
// A/B at one token, five interleaved rounds (H100, bench/results/2026-11-27-h100-decode-prefetch):
// fp8-channel Qwen3-30B-A3B 0.988, DeepSeek-V3 TP8 0.978 (x's quantisation is two passes there: the
// row amax, then the codes); fp8-block 0.971 / 1.011 and static fp8-tensor 1.020 / 1.007 - not taken.
// FUSEDMOE_DL_PREFETCH=0 (read once) turns it off for fp8-channel too (diagnostic switch).
bool dl_prefetch_on() {
  static const bool on = !env_switch_is_zero("FUSEDMOE_DL_PREFETCH");
  return on;
}

template <int kMode>
void launch_fp8(const DecodeLayerParams& p, cudaStream_t stream) {
  const int64_t cols = decode_layer_cols(p.gather.K, p.sm_count);
  const int64_t smem =
      decode_layer_smem_bytes(p.gather.K, p.act.N, p.gather.topk, p.sm_count, kMode == kChannelMode);
  DecodeLayerParams q = p;
  q.prefetch_first_round = kMode == kChannelMode && dl_prefetch_on();
  q.half_major_tasks = dl_half_major_tasks();
  launch_cooperative<decode_layer_kernel<kMode>>(q, cols, smem, stream);
}

}  // namespace

bool decode_layer::dl_half_major_tasks() {
  static const bool on = !env_switch_is_zero("FUSEDMOE_DL_TASK_ORDER");
  return on;
}

int64_t decode_layer_cols(int64_t K, int sm_count) {
  if (sm_count <= 0) return 0;
  const int64_t per = (K + sm_count - 1) / sm_count;
  return (per + 15) / 16 * 16;
}

int64_t decode_layer_smem_bytes(int64_t K, int64_t N, int64_t topk, int sm_count, bool channel) {
  // W2 slices (e4m3), x (e4m3), the GEMM2 bias of the columns (fp32), fp8-channel: the W2 column
  // scales (fp32), GEMM2's operand rows (e4m3)
  return topk * decode_layer_cols(K, sm_count) * (N + 4 + (channel ? 4 : 0)) + K + topk * N;
}

bool decode_layer_applies(const DecodeLayerParams& p) {
  const GatherParams& gp = p.gather;
  const ActivationParams& ap = p.act;
  const FinalizeParams& fp = p.fin;
  // fp8 only: the same kernel on bf16 weights (twice the bytes; the W2 slices fill shared memory)
  // measured 4-5% slower than the chain on Qwen3-30B-A3B at one token and equal on DeepSeek-V3
  // TP8 (H100, bench/results/2026-11-26-h100-decode-layer), so 16-bit layers keep the chain.
  const Operand op = gp.op;
  if (op != Operand::FP8 || ap.op != op) return false;
  const bool block = gp.quant == Fp8Quant::BLOCK, channel = gp.quant == Fp8Quant::ROW,
             dynamic = gp.quant == Fp8Quant::TENSOR_DYNAMIC;
  if (dynamic) {
    // fp8-tensor with dynamic scales: both amaxes inside the kernel; the staging row.
    if (ap.quant != Fp8Quant::TENSOR_DYNAMIC || ap.dq.kind != Dequant::TENSOR || fp.dq.kind != Dequant::TENSOR)
      return false;
    if (!p.stage || !aligned16(p.stage)) return false;
  } else if (channel) {
    // fp8-channel: per-token dynamic activation scales, per-channel weight scales; the staging row.
    if (ap.quant != Fp8Quant::ROW || ap.dq.kind != Dequant::CHANNEL || fp.dq.kind != Dequant::CHANNEL) return false;
    if (!p.stage || !aligned16(p.stage)) return false;
  } else if (block) {
    // fp8-block: 128 x 128 weight blocks of both GEMMs, their scales, and the staging row.
    if (ap.quant != Fp8Quant::BLOCK || ap.dq.kind != Dequant::NONE || fp.dq.kind != Dequant::NONE) return false;
    if (gp.K % 128 != 0 || ap.N % 128 != 0 || gp.K / 128 > kMaxKGroups || ap.N / 128 > kMaxNGroups) return false;
    if (!p.w13_scale || !p.w2_scale || !p.stage || !aligned16(p.stage)) return false;
  } else {
    if (gp.quant != Fp8Quant::TENSOR_STATIC || ap.quant != Fp8Quant::TENSOR_STATIC) return false;
    if (ap.dq.kind != Dequant::TENSOR || fp.dq.kind != Dequant::TENSOR) return false;
  }
  if (fp.M != 1 || gp.topk < 1 || gp.topk > kDecodeLayerMaxTopk || fp.topk != gp.topk) return false;
  if (gp.on_input || fp.on_input) return false;
  if (gp.x_dtype != DType::F32 && gp.x_dtype != DType::F16 && gp.x_dtype != DType::BF16) return false;
  if (ap.act == Activation::RELU2 || ap.R != 2 * ap.N || ap.N <= 0) return false;
  const int64_t K = gp.K;
  if (K <= 0 || K % 16 != 0 || fp.K != K || ap.N % 16 != 0) return false;
  if (!aligned16(gp.x) || !aligned16(p.w13) || !aligned16(p.w2) || !aligned16(ap.out) || !aligned16(fp.bias))
    return false;
  if (p.sm_count <= 0 || decode_layer_cols(K, p.sm_count) > kMaxCols) return false;
  if (channel && !aligned16(fp.dq.w)) return false;  // its column slices are bulk-copied
  return decode_layer_smem_bytes(K, ap.N, gp.topk, p.sm_count, channel) <= kMaxDynSmem;
}

void launch_decode_layer(const DecodeLayerParams& p, cudaStream_t stream) {
  if (!decode_layer_applies(p))
    throw Error("one-token layer kernel: the call is not one decode_layer_applies() accepts (K = " +
                std::to_string(p.gather.K) + ", N = " + std::to_string(p.act.N) + ", topk " +
                std::to_string(p.gather.topk) + ", M " + std::to_string(p.fin.M) + ")");
  if (p.gather.quant == Fp8Quant::BLOCK) launch_fp8<kBlockMode>(p, stream);
  else if (p.gather.quant == Fp8Quant::ROW) launch_fp8<kChannelMode>(p, stream);
  else if (p.gather.quant == Fp8Quant::TENSOR_DYNAMIC) launch_fp8<kDynTensorMode>(p, stream);
  else launch_fp8<kTensorMode>(p, stream);
}

}  // namespace fusedmoe::cuda
