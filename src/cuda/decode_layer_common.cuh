#pragma once
// What the one-token layer kernels share (decode_layer.cu: fp8 weights; decode_layer_w4.cu:
// MXFP4 / NVFP4 weights): the CTA shape (one 512-thread CTA per SM, two halves of 8 warps running
// GEMM1 tasks), the half barrier, the loads of rows other CTAs wrote, and the cooperative launch.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/cuda_check.hpp"
#include "cuda/decode_layer.hpp"
#include "cuda/device_utils.cuh"
#include "cuda/finalize_term.cuh"
#include "cuda/smem_opt_in.hpp"

namespace fusedmoe::cuda::decode_layer {

constexpr int kHalves = 2;                    // GEMM1 tasks in flight per CTA
constexpr int kHalfWarps = 8;                 // warps of one task (they split k)
constexpr int kWarps = kHalves * kHalfWarps;  // 16 warps, 512 threads, one CTA per SM
constexpr int kThreads = kWarps * 32;
constexpr int kOuts = 8;  // activation outputs per GEMM1 task (MMA rows: 8 gate + 8 up)
constexpr int kMaxSlots = static_cast<int>(kDecodeLayerMaxTopk);
constexpr int kMaxCols = 128;  // output columns per CTA (static y buffer)
// Dynamic shared memory the kernels are opted in to: the 227 KB of a Hopper SM's opt-in limit
// less the static part (GEMM2 sums by k part 16 KB, GEMM1 partial sums 2 KB, slots, tables) and
// some slack.
constexpr int kMaxDynSmem = 227 * 1024 - 24 * 1024;

__device__ __forceinline__ uint4 ld_shared16(const uint8_t* p) { return *reinterpret_cast<const uint4*>(p); }
// The GEMM2 operand rows were written by other CTAs before the grid barrier: read at L2 (.cg),
// never from a possibly stale L1 line.
__device__ __forceinline__ uint4 ld_l2_16(const uint8_t* p) { return __ldcg(reinterpret_cast<const uint4*>(p)); }

// Chunk l (8 floats) of an fp32 staging row written by other CTAs before the grid barrier (read at
// L2), or zeros.
__device__ __forceinline__ void load_staged8(const float4* row, int l, bool ok, float (&v)[8]) {
  float4 lo = make_float4(0.0f, 0.0f, 0.0f, 0.0f), hi = lo;
  if (ok) lo = __ldcg(row + 2 * l), hi = __ldcg(row + 2 * l + 1);
  v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
}
// Staged chunks of 8 per lane (or thread) kept in registers between a row's amax and its codes
// (rows up to 32 x kHeld chunks read once at L2, longer rows' rest twice).
constexpr int kHeld = 4;

// One warp quantises a staged row of `lanes` chunks of 8 with the row's own scale (the activation
// kernel's ROW case, amax / 448): the first kHeld chunks of each lane stay in registers between
// the amax and the codes, longer rows read the rest twice. store(l, v, s) writes chunk l's codes;
// returns the scale (every lane).
template <typename Store>
__device__ __forceinline__ float quantise_staged_row(const float4* row, int lanes, int lane, Store store) {
  float v[kHeld][8];
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < kHeld; ++i) {
    const int l = lane + 32 * i;
    load_staged8(row, l, l < lanes, v[i]);
    m = fmaxf(m, amax8(v[i]));
  }
  for (int l = lane + 32 * kHeld; l < lanes; l += 32) {
    float w[8];
    load_staged8(row, l, true, w);
    m = fmaxf(m, amax8(w));
  }
  const float s = scale_from_amax(warp_max(m));
#pragma unroll
  for (int i = 0; i < kHeld; ++i) {
    const int l = lane + 32 * i;
    if (l < lanes) store(l, v[i], s);
  }
  for (int l = lane + 32 * kHeld; l < lanes; l += 32) {
    float w[8];
    load_staged8(row, l, true, w);
    store(l, w, s);
  }
  return s;
}

// A CTA half's first GEMM1 task; the next ones follow every gridDim.x * kHalves tasks. Half-major:
// round r's tasks r * 2G + h * G + b (G CTAs), so the last, partial round gives one more task to
// half 0 of as many CTAs as it has tasks, not to both halves of half as many CTAs (the SM of a
// CTA with one half still busy runs that half alone).
__device__ __forceinline__ int64_t first_task(const DecodeLayerParams& p, int half) {
  return p.half_major_tasks ? static_cast<int64_t>(half) * gridDim.x + blockIdx.x
                            : static_cast<int64_t>(blockIdx.x) * kHalves + half;
}
// FUSEDMOE_DL_TASK_ORDER=0: the CTA-major order (both halves of a CTA take adjacent tasks).
bool dl_half_major_tasks();

// The top-k sum of a CTA's output columns after GEMM2 (ys[kp][s][j]: k part kp of slot s's column j;
// bias / wc: the slots' bias and fp8-channel column scales of the CTA's columns, [topk][cols], or
// null): first every (slot, column) term by its own thread (a warp per slot, lanes over columns) -
// the k parts added in order, then slot_term's dequant and bias - into ys[0], then each column's
// weighted sum in slot order. The same operations in the same order as add_slot_loaded over the
// slots (the same bits). One warp walking the slots of its columns took ~1.5 us of the one-token
// layer, the other 15 warps at the final barrier (ncu PC sampling); a thread per column with the
// slot loop unrolled gained 0.6% where this form gains 3% (bench/results/2026-11-27-h100-decode-tail).
// Whole block; the caller synchronised after writing ys.
template <int kCols>
__device__ __forceinline__ void topk_sum_store(const FinalizeParams& fp, float (&ys)[4][kMaxSlots][kCols], int kparts,
                                               const int32_t* expert, const float* weight, const float* factor,
                                               const float* bias, const float* wc, int topk, int cols, int ncols,
                                               int64_t c0) {
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  for (int s = warp; s < topk; s += static_cast<int>(blockDim.x >> 5)) {
    if (expert[s] < 0) continue;
    for (int j = lane; j < ncols; j += 32) {
      float y = ys[0][s][j];
      for (int kp = 1; kp < kparts; ++kp) y += ys[kp][s][j];
      ys[0][s][j] = slot_term(fp, y, factor[s], wc ? wc[s * cols + j] : 1.0f, bias ? bias[s * cols + j] : 0.0f);
    }
  }
  __syncthreads();
  for (int j = threadIdx.x; j < ncols; j += blockDim.x) {
    float out = 0.0f;
#pragma unroll
    for (int s = 0; s < kMaxSlots; ++s)
      if (s < topk && expert[s] >= 0) out = __fmaf_rn(weight[s], ys[0][s][j], out);
    store_from_float(fp.out, fp.out_dtype, c0 + j, out);
  }
}

__device__ __forceinline__ void half_barrier(int half) {
  asm volatile("bar.sync %0, %1;" ::"r"(1 + half), "r"(kHalfWarps * 32) : "memory");
}

// A GEMM1 task's gate / up sums of output `o`: the partial sums of its kW warps ([warp][gate, up]
// [output]) added in warp order (deterministic).
template <int kW, int kO>
__device__ __forceinline__ void sum_task_parts(const float (&part)[kW][2][kO], int o, float& gate, float& up) {
  gate = part[0][0][o], up = part[0][1][o];
#pragma unroll
  for (int w = 1; w < kW; ++w) {
    gate += part[w][0][o];
    up += part[w][1][o];
  }
}

__host__ __device__ inline bool aligned16(const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; }

// Cooperative (the grid barrier needs every CTA resident: one CTA per SM) with programmatic
// stream serialisation (the kernel may start while the previous kernel drains).
template <auto Kernel>
void launch_cooperative(const DecodeLayerParams& p, int64_t cols, int64_t smem, cudaStream_t stream) {
  opt_in_dynamic_smem<Kernel>(kMaxDynSmem);
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeCooperative;
  attr[1].val.cooperative = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(p.sm_count));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 2;
  FUSEDMOE_CUDA_CHECK(cudaLaunchKernelEx(&cfg, Kernel, p, cols));
}

}  // namespace fusedmoe::cuda::decode_layer
