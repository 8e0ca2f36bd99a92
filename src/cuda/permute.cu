// Permute stage: the routing plan (which row of the expert-grouped order each slot goes to) and
// the gather of GEMM1's operand rows (router weight on input, conversion / fp8 quantisation).
//
// Determinism: rows inside an expert are ordered by slot index i = t * topk + k (as the CPU
// backend). Counting uses shared-memory atomics, whose order cannot change an integer count;
// positions are assigned by one warp walking its slots in order (__match_any_sync gives the
// rank among equal experts), never by atomics whose order would leak into the result.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.hpp"
#include "cuda/device_utils.cuh"
#include "cuda/env_switch.hpp"
#include "cuda/expert_id.cuh"
#include "fusedmoe/error.hpp"

namespace fusedmoe::cuda {
namespace {

// Slots per chunk of the general (multi-block) plan; also the limit of the one-block plan.
constexpr int kChunk = 1024;
// Slots up to which the whole plan runs in one block (plan_small_kernel) instead of the three
// chunked kernels. Same-binary A/B on an H100 (bench/results/2026-11-27-h100-block-plan): 2048
// slots 0.994-0.999x the layer time (Qwen3-30B-A3B / DeepSeek-V3 TP8 at 256 tokens), 8192 slots
// 1.02-1.04x, 32768 1.07-1.14x.
constexpr int64_t kBlockPlanSlots = 2048;
constexpr int kScanThreads = 1024;  // plan_scan_kernel
constexpr int kWarpPlanSlots = 32;    // up to here one warp places every slot (shuffles)
// Up to here the plan_gather kernels and plan_tiny_kernel place the slots with the whole block
// (each slot counts the slots before it in shared memory); past it the plan kernels run.
constexpr int kFusedPlanSlots = 256;

// In-place exclusive scan of n ints in shared memory by the whole block (blockDim.x a multiple
// of 32). Each thread scans a contiguous segment, then the segment sums are scanned.
// Returns the total to every thread.
__device__ int32_t block_exclusive_scan(int32_t* data, int n) {
  __shared__ int32_t warp_sums[32];
  __shared__ int32_t total_s;
  const int tid = threadIdx.x, nt = blockDim.x;
  const int per = (n + nt - 1) / nt;
  const int b = min(n, tid * per), e = min(n, b + per);
  int32_t sum = 0;
  for (int j = b; j < e; ++j) sum += data[j];
  // Inclusive warp scan of the segment sums.
  const int lane = tid & 31, warp = tid >> 5;
  int32_t incl = sum;
  for (int o = 1; o < 32; o <<= 1) {
    const int32_t v = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += v;
  }
  if (lane == 31) warp_sums[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    const int nw = nt >> 5;
    int32_t w = lane < nw ? warp_sums[lane] : 0;
    int32_t wi = w;
    for (int o = 1; o < 32; o <<= 1) {
      const int32_t v = __shfl_up_sync(0xffffffffu, wi, o);
      if (lane >= o) wi += v;
    }
    if (lane < nw) warp_sums[lane] = wi - w;  // exclusive
    if (lane == 31) total_s = wi;
  }
  __syncthreads();
  int32_t run = warp_sums[warp] + incl - sum;
  for (int j = b; j < e; ++j) {
    const int32_t v = data[j];
    data[j] = run;
    run += v;
  }
  __syncthreads();
  return total_s;
}

// Expert and SIMT-tile offsets from per-expert counts in shared memory (counts are overwritten).
__device__ void write_offsets(int32_t* counts, int32_t* tiles, int E, const PlanBuffers& p) {
  for (int e = threadIdx.x; e < E; e += blockDim.x) tiles[e] = (counts[e] + kSimtTileM - 1) / kSimtTileM;
  __syncthreads();
  const int32_t rows = block_exclusive_scan(counts, E);
  const int32_t ntiles = block_exclusive_scan(tiles, E);
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    p.expert_offsets[e] = counts[e];
    p.tile_offsets[e] = tiles[e];
  }
  if (threadIdx.x == 0) {
    p.expert_offsets[E] = rows;
    p.tile_offsets[E] = ntiles;
  }
}

// One warp assigns rows to slots [begin, end) in slot order. run[e] = next free row of expert e
// (shared memory, private to this warp). ex(i) gives the slot's local expert.
template <typename ExpertOf>
__device__ void place_slots(int64_t begin, int64_t end, int32_t* run, ExpertOf ex, const PlanBuffers& p) {
  const int lane = threadIdx.x & 31;
  const unsigned lt_mask = (1u << lane) - 1u;
  for (int64_t base = begin; base < end; base += 32) {
    const int64_t i = base + lane;
    const int32_t e = i < end ? ex(i) : -2;  // -2: past the end (never matches a real slot)
    const unsigned same = __match_any_sync(0xffffffffu, e);
    int32_t row = -1;
    if (e >= 0) row = run[e] + __popc(same & lt_mask);
    __syncwarp();
    if (e >= 0 && (same & lt_mask) == 0) run[e] += __popc(same);  // the group's first lane
    __syncwarp();
    if (i < end) {
      p.slot_row[i] = row;
      if (row >= 0) {
        p.row_slot[row] = static_cast<int32_t>(i);
        p.row_expert[row] = e;
      }
    }
  }
}

// Places slots [begin, end) with the whole block: the range is split into one
// contiguous run per warp; each warp counts its run's experts (shared-memory atomics: integer
// counts do not depend on their order), the counts are scanned over the warps per expert from
// first_row(e), and every warp places its run. The rows are those of one warp walking the range
// in slot order; the walk's iterations are spread over the warps. run: [warps][E] shared ints.
template <typename FirstRow, typename ExpertOf>
__device__ void place_range(int64_t begin, int64_t end, int E, int32_t* run, FirstRow first_row, ExpertOf ex,
                            const PlanBuffers& p) {
  const int warps = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t per = (end - begin + warps - 1) / warps;
  const int64_t wb = min(end, begin + warp * per), we = min(end, wb + per);
  int32_t* mine = run + static_cast<int64_t>(warp) * E;
  for (int e = lane; e < E; e += 32) mine[e] = 0;
  __syncwarp();
  for (int64_t i = wb + lane; i < we; i += 32) {
    const int32_t e = ex(i);
    if (e >= 0) atomicAdd(&mine[e], 1);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int32_t next = first_row(e);
    for (int w = 0; w < warps; ++w) {
      const int32_t n = run[static_cast<int64_t>(w) * E + e];
      run[static_cast<int64_t>(w) * E + e] = next;
      next += n;
    }
  }
  __syncthreads();
  place_slots(wb, we, mine, ex, p);
}

// Small problems (slots <= kBlockPlanSlots): the whole plan in one block. The slots' experts sit
// in shared memory up to kChunk slots, in the general path's global scratch (slot_expert) above.
__global__ void plan_small_kernel(const int32_t* ids, const int32_t* emap, int64_t slots, int E, int64_t num_global,
                                  PlanBuffers p) {
  chain_wait();
  extern __shared__ int32_t smem[];
  const bool in_smem = slots <= kChunk;
  int32_t* counts = smem;                             // [E]
  int32_t* ex = in_smem ? smem + E : p.slot_expert;   // [slots]
  int32_t* run = smem + E + (in_smem ? kChunk : 0);   // place_range's [warps][E]
  int32_t* tiles = run;          // [E], done with before place_range
  for (int e = threadIdx.x; e < E; e += blockDim.x) counts[e] = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < slots; i += blockDim.x) {
    const int32_t e = local_expert(ids, emap, i, E, num_global);
    ex[i] = e;
    if (e >= 0) atomicAdd(&counts[e], 1);
  }
  __syncthreads();
  write_offsets(counts, tiles, E, p);  // counts now hold the offsets
  __syncthreads();
  place_range(0, slots, E, run, [&](int e) { return counts[e]; }, [&](int64_t i) { return ex[i]; }, p);
}

// General path, 1/3: each block counts the experts of one chunk of slots.
__global__ void plan_count_kernel(const int32_t* ids, const int32_t* emap, int64_t slots, int E, int64_t num_global,
                                  PlanBuffers p) {
  chain_wait();
  extern __shared__ int32_t counts[];  // [E]
  for (int e = threadIdx.x; e < E; e += blockDim.x) counts[e] = 0;
  __syncthreads();
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kChunk;
  const int64_t end = min(slots, begin + kChunk);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const int32_t e = local_expert(ids, emap, i, E, num_global);
    p.slot_expert[i] = e;
    if (e >= 0) atomicAdd(&counts[e], 1);
  }
  __syncthreads();
  int32_t* out = p.chunk_counts + static_cast<int64_t>(blockIdx.x) * E;
  for (int e = threadIdx.x; e < E; e += blockDim.x) out[e] = counts[e];
}

// General path, 2/3 (one block): per expert, exclusive scan over the chunks (in place), then
// the expert and tile offsets.
__global__ void plan_scan_kernel(int64_t chunks, int E, PlanBuffers p) {
  chain_wait();
  extern __shared__ int32_t smem[];
  int32_t* counts = smem;     // [E]
  int32_t* tiles = smem + E;  // [E]
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int32_t run = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      int32_t* cc = p.chunk_counts + c * E + e;
      const int32_t v = *cc;
      *cc = run;
      run += v;
    }
    counts[e] = run;
  }
  __syncthreads();
  write_offsets(counts, tiles, E, p);
}

// General path, 3/3: one block per chunk places its slots after those of earlier chunks.
__global__ void plan_place_kernel(int64_t slots, int E, PlanBuffers p) {
  chain_wait();
  extern __shared__ int32_t run[];  // [warps][E]
  const int64_t c = blockIdx.x;
  const int32_t* se = p.slot_expert;
  place_range(
      c * kChunk, min(slots, (c + 1) * kChunk), E, run,
      [&](int e) { return p.expert_offsets[e] + p.chunk_counts[c * E + e]; }, [&](int64_t i) { return se[i]; }, p);
}

// Warps of a place_range block: up to 32, while their [warps][E] counts and `other` ints of
// dynamic shared memory fit in 48 KB beside the kernels' static shared memory (block_exclusive_scan's
// 33 ints; kStaticSmemInts reserves 64). Without the reserve the dynamic part reached exactly 48 KB
// where 48 KB / 4 - other is a multiple of E (E = 512 at up to 2048 slots, E = 384, 2816, ...) and
// the launch failed.
constexpr int kStaticSmemInts = 64;
int place_warps(int E, int other = 0) {
  const int64_t fit = (12288 - kStaticSmemInts - other) / std::max(E, 1);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(32, fit)));
}

// ---- GEMM1 operand ----

// The operand value of element k of row r before quantisation (oracle: x, or round(x * w)).
__device__ __forceinline__ float gemm1_value(const GatherParams& p, int64_t t, float w, int64_t k) {
  const float x = load_as_float(p.x, p.x_dtype, t * p.K + k);
  return p.on_input ? round_to(p.x_dtype, x * w) : x;
}

// The same for the 8 elements [k, k + 8) (k a multiple of 8): one 16-byte load of x.
__device__ __forceinline__ void gemm1_values8(const GatherParams& p, int64_t t, float w, int64_t k, float (&v)[8]) {
  load8_as_float(p.x, p.x_dtype, t * p.K + k, v);
  if (p.on_input) {
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = round_to(p.x_dtype, v[j] * w);
  }
}

__global__ void hidden_amax_kernel(const void* x, DType dt, int64_t n, float* amax_bits) {
  chain_wait();
  float m = 0.0f;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    m = fmaxf(m, abs_for_amax(load_as_float(x, dt, i)));
  m = block_max(m);
  if (threadIdx.x == 0) atomic_max_nonneg(amax_bits, m);
}

// The same amax with 16-byte loads (x 16-byte aligned, n a multiple of 8) instead of one element
// per thread and step. With gather_vec_row_kernel: fp8-tensor layer -1..-3% at 1024 / 4096 tokens
// (H100, bench/results/2026-11-21-h100-05e3932-large-m-gather; the two were not measured apart).
__global__ void __launch_bounds__(kVecThreads) hidden_amax_vec_kernel(const void* x, DType dt, int64_t n,
                                                                      float* amax_bits) {
  chain_wait();
  float m = 0.0f;
  for (int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 8; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x * 8) {
    float v[8];
    load8_as_float(x, dt, i, v);
    m = fmaxf(m, amax8(v));
  }
  m = block_max(m);
  if (threadIdx.x == 0) atomic_max_nonneg(amax_bits, m);
}

// amax of the router-weighted rows (apply_router_weight_on_input): one block per row.
__global__ void weighted_rows_amax_kernel(GatherParams p, float* amax_bits) {
  chain_wait();
  const int64_t r = blockIdx.x;
  if (r >= load_rows(p.rows)) return;
  const int64_t i = p.row_slot[r], t = i / p.topk;
  const float w = p.topk_weights[i];
  const ColRange cr = block_columns(p.K);
  float m = 0.0f;
  for (int64_t k = cr.begin + threadIdx.x; k < cr.end; k += blockDim.x) m = fmaxf(m, abs_for_amax(gemm1_value(p, t, w, k)));
  m = block_max(m);
  if (threadIdx.x == 0) atomic_max_nonneg(amax_bits, m);
}

// One block per row and column chunk (ROW quantisation: gridDim.y == 1, the whole row):
// gather, convert or quantise.
__global__ void gather_kernel(GatherParams p) {
  chain_wait();
  const int64_t r = blockIdx.x;
  if (r >= load_rows(p.rows)) return;
  const int64_t i = p.row_slot[r], t = i / p.topk;
  const float w = p.on_input ? p.topk_weights[i] : 1.0f;
  const int64_t base = r * p.K;
  const ColRange cr = block_columns(p.K);
  if (p.quant == Fp8Quant::NONE) {
    for (int64_t k = cr.begin + threadIdx.x; k < cr.end; k += blockDim.x)
      store_operand(p.out, p.op, base + k, gemm1_value(p, t, w, k), p.korder);
    return;
  }
  uint8_t* q = static_cast<uint8_t*>(p.out);
  float s;
  if (p.quant == Fp8Quant::NVFP4) {  // whole row (gridDim.y == 1)
    const float gs = 1.0f / p.nvfp4_input_scale[p.block.row_expert[r]];
    quantise_nvfp4_row(
        p.out, p.op, base, p.K, gs, [&](int64_t k) { return gemm1_value(p, t, w, k); }, p.korder);
  } else if (p.quant == Fp8Quant::ROW) {
    float m = 0.0f;
    for (int64_t k = threadIdx.x; k < p.K; k += blockDim.x) m = fmaxf(m, abs_for_amax(gemm1_value(p, t, w, k)));
    s = scale_from_amax(block_max(m));
    if (threadIdx.x == 0) p.row_scale[r] = s;
    for (int64_t k = threadIdx.x; k < p.K; k += blockDim.x)
      store_row_code(p.out, p.op, base + k, quant_row(gemm1_value(p, t, w, k), s), p.korder);
  } else {
    s = tensor_scale_value(p.scale);
    for (int64_t k = cr.begin + threadIdx.x; k < cr.end; k += blockDim.x) q[base + k] = quant_tensor(gemm1_value(p, t, w, k), s);
  }
}

// fp8-block (Fp8Quant::BLOCK): one warp per 128-wide group of a row, kBlockGroupsPerCta groups
// per block (blockIdx.y picks the first); values, codes and scales as the CPU oracle's
// quantize_fp8_per_token_group on the same row.
__global__ void gather_block_kernel(GatherParams p) {
  chain_wait();
  const int64_t r = blockIdx.x;
  if (r >= load_rows(p.rows)) return;
  const int64_t g = static_cast<int64_t>(blockIdx.y) * kBlockGroupsPerCta + threadIdx.x / 32;
  if (g * kFp8Block >= p.K) return;
  const int64_t i = p.row_slot[r], t = i / p.topk;
  const float w = p.on_input ? p.topk_weights[i] : 1.0f;
  uint8_t* q = static_cast<uint8_t*>(p.out) + r * p.K;
  quantise_block_group(p.block, r, g, p.K, q, [&](int64_t k) { return gemm1_value(p, t, w, k); });
}

// fp8-block, K a multiple of 128: one block per row (grid-stride over the rows that exist), half
// a warp per 128-wide group, 8 columns per lane (block_scale_half_warp / block_codes8). Values,
// scales and codes as gather_block_kernel.
__global__ void __launch_bounds__(kVecThreads) gather_block_vec_kernel(GatherParams p) {
  chain_wait();
  const int32_t rows = load_rows(p.rows);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t i = __ldg(p.row_slot + r), t = i / p.topk;
    const float w = p.on_input ? __ldg(p.topk_weights + i) : 1.0f;
    quantise_block_row(p.block, r, static_cast<int>(p.K / 8), static_cast<uint8_t*>(p.out) + r * p.K,
                       [&](int l, float (&v)[8]) { gemm1_values8(p, t, w, static_cast<int64_t>(l) * 8, v); });
  }
}

// Where a gather finds row r's slot and the row count: the plan in global memory (after
// launch_plan) or the block's own small plan in shared memory (the plan_gather kernels).
// expert(r): row r's local expert (the nvfp4 gather's input scale).
struct GlobalRows {
  const int32_t* row_slot;
  const int32_t* rows;
  const int32_t* row_expert = nullptr;
  __device__ int32_t count() const { return load_rows(rows); }
  __device__ int64_t slot(int64_t r) const { return __ldg(row_slot + r); }
  __device__ int32_t expert(int64_t r) const { return __ldg(row_expert + r); }
};
constexpr int kKeySlotBits = 9;  // slot index bits of small_plan_block's (expert, slot) keys
__device__ __forceinline__ int32_t key_expert(int32_t key) { return key >> kKeySlotBits; }
struct SharedRows {
  const int32_t* row_slot;  // shared memory
  const int32_t* slot_key;  // shared memory: each slot's expert, or (keys) its (expert, slot) key
  bool keys;
  int32_t rows;
  __device__ int32_t count() const { return rows; }
  __device__ int64_t slot(int64_t r) const { return row_slot[r]; }
  __device__ int32_t expert(int64_t r) const {
    const int32_t v = slot_key[row_slot[r]];
    return keys ? key_expert(v) : v;
  }
};

// ROW quantisation (per-token fp8), K a multiple of 8: one block per row (grid-stride over the
// rows that exist), 8 columns per thread and step, the row read twice (amax, then codes; the
// second read hits the cache). Values, scale and codes as gather_kernel's ROW case.
template <class Rows>
__device__ void gather_row_vec_rows(const GatherParams& p, const Rows& src) {
  const int32_t rows = src.count();
  const int lanes = static_cast<int>(p.K / 8);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t i = src.slot(r), t = i / p.topk;
    const float w = p.on_input ? __ldg(p.topk_weights + i) : 1.0f;
    auto load = [&](int l, float (&v)[8]) { gemm1_values8(p, t, w, static_cast<int64_t>(l) * 8, v); };
    float m = 0.0f;
    for (int l = threadIdx.x; l < lanes; l += blockDim.x) {
      float v[8];
      load(l, v);
      m = fmaxf(m, amax8(v));
    }
    const float s = scale_from_amax(block_max(m));
    if (threadIdx.x == 0) p.row_scale[r] = s;
    for (int l = threadIdx.x; l < lanes; l += blockDim.x) {
      float v[8];
      load(l, v);
      store8_row_codes(p.out, p.op, r * p.K + static_cast<int64_t>(l) * 8, v, s, p.korder);
    }
  }
}

// kThreads: kVecThreads, or kRowWideThreads at few rows (row_gather_wide below).
template <int kThreads>
__global__ void __launch_bounds__(kThreads) gather_row_vec_kernel(GatherParams p) {
  chain_wait();
  gather_row_vec_rows(p, GlobalRows{p.row_slot, p.rows});
}

// NVFP4 (W4A4), K a multiple of 16, 16-bit operand: one block per row (grid-stride over the rows
// that exist), one 16-wide block per thread and step, 16-byte loads and stores. Values as
// gather_kernel's NVFP4 case.
template <class Rows>
__device__ void gather_nvfp4_vec_rows(const GatherParams& p, const Rows& src) {
  const int32_t rows = src.count();
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t i = src.slot(r), t = i / p.topk;
    const float w = p.on_input ? __ldg(p.topk_weights + i) : 1.0f;
    const float gs = 1.0f / p.nvfp4_input_scale[src.expert(r)];
    quantise_nvfp4_row_vec(
        p.out, p.op, r * p.K, p.K, gs, [&](int64_t c, float (&v)[8]) { gemm1_values8(p, t, w, c, v); }, p.korder);
  }
}

__global__ void __launch_bounds__(kVecThreads) gather_nvfp4_vec_kernel(GatherParams p) {
  chain_wait();
  gather_nvfp4_vec_rows(p, GlobalRows{p.row_slot, p.rows, p.block.row_expert});
}

// The 8 operand values of the vector gathers as stored: converted (16-bit operands, 16 bytes) or
// quantised with the per-tensor scale s (fp8: 8 bytes in .x .y).
__device__ __forceinline__ uint4 pack_gather8(const GatherParams& p, const float (&v)[8], bool fp8, float s) {
  if (!fp8) return pack8_operand16(p.op, v);
  uint8_t q[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) q[j] = quant_tensor(v[j], s);
  return make_uint4(pack4_e4m3(q[0], q[1], q[2], q[3]), pack4_e4m3(q[4], q[5], q[6], q[7]), 0u, 0u);
}
// Stores the 8 operand values of the vector gathers at element o.
__device__ __forceinline__ void store_gather8(const GatherParams& p, int64_t o, const float (&v)[8], bool fp8,
                                              float s) {
  store_packed8(p.out, fp8 ? Operand::FP8 : p.op, o, pack_gather8(p, v, fp8, s), fp8 ? KOrder::NATURAL : p.korder);
}

// Vector gather (NONE and TENSOR_* quantisation): one thread per (row, 8 columns), grid-stride
// over the rows that exist (the device count), 16-byte loads of x, 16-byte (bf16 / fp16) or
// 8-byte (e4m3) stores. Values and rounding as gather_kernel.
template <class Rows>
__device__ void gather_vec_rows(const GatherParams& p, const Rows& src) {
  const int64_t vecs = p.K / 8;
  const int64_t items = static_cast<int64_t>(src.count()) * vecs;
  const bool fp8 = p.quant != Fp8Quant::NONE;
  const float s = fp8 ? tensor_scale_value(p.scale) : 1.0f;
  for (int64_t it = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; it < items;
       it += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = it / vecs, k = (it - r * vecs) * 8;
    const int64_t i = src.slot(r), t = i / p.topk;
    float v[8];
    gemm1_values8(p, t, p.on_input ? __ldg(p.topk_weights + i) : 1.0f, k, v);
    store_gather8(p, r * p.K + k, v, fp8, s);
  }
}

__global__ void __launch_bounds__(kVecThreads) gather_vec_kernel(GatherParams p) {
  chain_wait();
  gather_vec_rows(p, GlobalRows{p.row_slot, p.rows});
}

// The same for many rows: one block per row (grid-stride over the rows that exist), 8 columns
// per thread and step, so the row's slot, token and weight are found once per row instead of two
// 64-bit divisions per 8 values. Values and rounding as gather_vec_rows. Measured at 1024 / 4096
// tokens (bench/results/2026-11-21-h100-05e3932-large-m-gather): bf16 layers unchanged (within
// 0.4%), so the permute stage's 3-4x over its copy time there has another cause.
__global__ void __launch_bounds__(kVecThreads) gather_vec_row_kernel(GatherParams p) {
  chain_wait();
  const int32_t rows = load_rows(p.rows);
  const int lanes = static_cast<int>(p.K / 8);
  const bool fp8 = p.quant != Fp8Quant::NONE;
  const float s = fp8 ? tensor_scale_value(p.scale) : 1.0f;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t i = __ldg(p.row_slot + r), t = i / p.topk;
    const float w = p.on_input ? __ldg(p.topk_weights + i) : 1.0f;
    for (int l = threadIdx.x; l < lanes; l += blockDim.x) {
      const int64_t k = static_cast<int64_t>(l) * 8;
      float v[8];
      gemm1_values8(p, t, w, k, v);
      store_gather8(p, r * p.K + k, v, fp8, s);
    }
  }
}
// Rows from which gather_vec_row_kernel serves the vector gather (below: one thread per (row, 8
// columns) over the whole grid, more blocks per row for decode-sized calls).
constexpr int64_t kGatherRowWalkMinRows = 256;

// ---- token-major gathers (many tokens, no router weight on the input) ----
// The row walks above read x once per slot, and the rows of one token sit experts apart: at 4096
// tokens of DeepSeek-V3's 7168 columns x is 58 MB, more than the L2, so each slot re-reads its
// token from HBM. Without the router weight on the input a token's rows are equal, so these kernels
// take one token per block (grid-stride over the M tokens), read and convert / quantise each
// 8-column chunk once and store it to the row of every slot of the token (slot_row; -1: no row).
// Values, codes and scales as the row kernels (tested bitwise against the general gather).
template <class Each>
__device__ __forceinline__ void for_token_rows(const GatherParams& p, int64_t t, Each each) {
  for (int64_t k = 0; k < p.topk; ++k) {
    const int32_t r = __ldg(p.slot_row + t * p.topk + k);
    if (r >= 0) each(static_cast<int64_t>(r));
  }
}

// NONE and TENSOR_* quantisation, as gather_vec_row_kernel. kTokenOrder: GEMM1's operand for the
// gathered GEMM1 (sm90_gemm1_gather_applies, launch_token_codes) - static fp8-tensor codes in token
// order, one row per token (the codes stored to every slot's row otherwise); GEMM1 then loads each
// row of its tiles from here by the row's token.
template <bool kTokenOrder>
__global__ void __launch_bounds__(kVecThreads) gather_token_vec_kernel(GatherParams p) {
  chain_wait();
  const int lanes = static_cast<int>(p.K / 8);
  const bool fp8 = kTokenOrder || p.quant != Fp8Quant::NONE;
  const float s = fp8 ? tensor_scale_value(p.scale) : 1.0f;
  const Operand op = fp8 ? Operand::FP8 : p.op;
  for (int64_t t = blockIdx.x; t < p.M; t += gridDim.x) {
    for (int l = threadIdx.x; l < lanes; l += blockDim.x) {
      const int64_t k = static_cast<int64_t>(l) * 8;
      float v[8];
      gemm1_values8(p, t, 1.0f, k, v);
      const uint4 w = pack_gather8(p, v, fp8, s);
      if constexpr (kTokenOrder) {
        store_packed8(p.out, Operand::FP8, t * p.K + k, w, KOrder::NATURAL);
      } else {
        const KOrder ko = fp8 ? KOrder::NATURAL : p.korder;
        for_token_rows(p, t, [&](int64_t r) { store_packed8(p.out, op, r * p.K + k, w, ko); });
      }
    }
  }
}

// ROW (per-token fp8), as gather_row_vec_kernel: the token's amax once, its scale to every row.
// kTokenOrder: the same codes once per token, in token order (fp8-channel's gathered GEMM1), the
// scale still written to every slot's row (the fused GEMM1 + activation's per-row dequant reads it
// by row).
template <bool kTokenOrder>
__global__ void __launch_bounds__(kVecThreads) gather_token_row_vec_kernel(GatherParams p) {
  chain_wait();
  const int lanes = static_cast<int>(p.K / 8);
  for (int64_t t = blockIdx.x; t < p.M; t += gridDim.x) {
    float m = 0.0f;
    for (int l = threadIdx.x; l < lanes; l += blockDim.x) {
      float v[8];
      gemm1_values8(p, t, 1.0f, static_cast<int64_t>(l) * 8, v);
      m = fmaxf(m, amax8(v));
    }
    const float s = scale_from_amax(block_max(m));
    if (threadIdx.x == 0) for_token_rows(p, t, [&](int64_t r) { p.row_scale[r] = s; });
    for (int l = threadIdx.x; l < lanes; l += blockDim.x) {
      const int64_t k = static_cast<int64_t>(l) * 8;
      float v[8];
      gemm1_values8(p, t, 1.0f, k, v);
      if constexpr (kTokenOrder) {
        store_packed8(p.out, Operand::FP8, t * p.K + k, pack8_row_codes(Operand::FP8, v, s), KOrder::NATURAL);
      } else {
        const uint4 w = pack8_row_codes(p.op, v, s);
        for_token_rows(p, t, [&](int64_t r) { store_packed8(p.out, p.op, r * p.K + k, w, p.korder); });
      }
    }
  }
}

// BLOCK (fp8-block 1x128 groups, K a multiple of 128), as gather_block_vec_kernel.
__global__ void __launch_bounds__(kVecThreads) gather_token_block_vec_kernel(GatherParams p) {
  chain_wait();
  const int lanes = static_cast<int>(p.K / 8);
  uint8_t* q = static_cast<uint8_t*>(p.out);
  for (int64_t t = blockIdx.x; t < p.M; t += gridDim.x) {
    quantise_block_lanes(
        lanes, p.block.ue8m0, [&](int l, float (&v)[8]) { gemm1_values8(p, t, 1.0f, static_cast<int64_t>(l) * 8, v); },
        [&](int l, uint2 codes, float s) {
          for_token_rows(p, t, [&](int64_t r) {
            *reinterpret_cast<uint2*>(q + r * p.K + static_cast<int64_t>(l) * 8) = codes;
            if ((l & 15) == 0) p.block.scale[block_scale_index(p.block, r, l / 16, lanes / 16)] = s;
          });
        });
  }
}

// NVFP4 (W4A4, K a multiple of 16, 16-bit operand), as gather_nvfp4_vec_kernel. A row's values
// depend on its expert's global scale (gs = 1 / input_scale[e]), so a token's rows are equal only
// between slots whose experts share gs - in checkpoints usually all of them (one input scale for
// every expert). The token's slot rows and gs sit in shared memory; each distinct gs (by its bits)
// quantises the token once and stores to every row of a slot with that gs, so shared scales cost
// one quantisation per token instead of one per slot (top-8: 8x fewer e2m1 divisions).
// In the 4-bit wgmma kernel's k order (W4_WGMMA) a 16-block's values land in every quarter of its
// 64-column group (4-byte pieces 32 bytes apart: 1.45-1.57x the permute stage of the layer at 4096
// tokens, H100, bench/results/2026-11-26-h100-w4-kperm); the 4 lanes holding a group's 4 blocks
// exchange them through shared memory first, so each stores 32 contiguous bytes (quad_stored32).
constexpr int kTokenNvfp4MaxSlots = 64;
__global__ void __launch_bounds__(kVecThreads) gather_token_nvfp4_vec_kernel(GatherParams p) {
  chain_wait();
  __shared__ int32_t row[kTokenNvfp4MaxSlots];
  __shared__ uint32_t gs_bits[kTokenNvfp4MaxSlots];
  __shared__ __align__(16) uint32_t stage[kVecThreads / 32][256];  // W4_WGMMA: each warp's 8 groups
  const bool wgmma = p.korder == KOrder::W4_WGMMA;
  const int topk = static_cast<int>(p.topk);
  const int blocks16 = static_cast<int>(p.K / 16);
  for (int64_t t = blockIdx.x; t < p.M; t += gridDim.x) {
    __syncthreads();  // the previous token's slots are no longer read
    for (int k = threadIdx.x; k < topk; k += blockDim.x) {
      const int32_t r = __ldg(p.slot_row + t * p.topk + k);
      row[k] = r;
      gs_bits[k] = r >= 0 ? __float_as_uint(1.0f / p.nvfp4_input_scale[p.block.row_expert[r]]) : 0u;
    }
    __syncthreads();
    for (int k = 0; k < topk; ++k) {  // uniform over the block
      if (row[k] < 0) continue;
      bool first = true;  // the first slot with this gs quantises for all of them
      for (int j = 0; j < k; ++j) first = first && !(row[j] >= 0 && gs_bits[j] == gs_bits[k]);
      if (!first) continue;
      const float gs = __uint_as_float(gs_bits[k]);
      for (int b = threadIdx.x; b < blocks16; b += blockDim.x) {
        float v[16];
        const int64_t c = static_cast<int64_t>(b) * 16;
        float x[8];
        gemm1_values8(p, t, 1.0f, c, x);
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] = x[j];
        gemm1_values8(p, t, 1.0f, c + 8, x);
#pragma unroll
        for (int j = 0; j < 8; ++j) v[8 + j] = x[j];
        nvfp4_block_values(v, gs);
        float lo[8], hi[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) lo[j] = v[j], hi[j] = v[8 + j];
        uint4 st[2];  // W4_WGMMA: the 32 stored bytes this lane writes (quad_stored32)
        if (wgmma) {
          // The warp's lanes in this pass: its first blocks16 - (b - lane) (blockDim a multiple of 32).
          const int live = blocks16 - (b - static_cast<int>(threadIdx.x & 31));
          const unsigned lanes = live >= 32 ? 0xffffffffu : (1u << live) - 1u;
          quad_stored32(pack8_operand16(p.op, lo), pack8_operand16(p.op, hi), stage[threadIdx.x >> 5], lanes, st);
        }
        for (int j = k; j < topk; ++j) {
          if (row[j] < 0 || gs_bits[j] != gs_bits[k]) continue;
          const int64_t base = static_cast<int64_t>(row[j]) * p.K + c;
          if (wgmma) {
            uint4* q = reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.out) + (base & ~int64_t{63}) + 16 * (b & 3));
            q[0] = st[0], q[1] = st[1];
          } else {
            store8_operand16(p.out, p.op, base, lo, p.korder);
            store8_operand16(p.out, p.op, base + 8, hi, p.korder);
          }
        }
      }
    }
  }
}

// ---- plan and gather in one kernel (decode-sized calls) ----
// With at most kFusedPlanSlots slots every block of a plan_gather kernel places the slots itself
// in shared memory, so the gather needs no plan kernel before it; block 0 also writes the plan
// arrays the later stages read (slot_row, row_slot, row_expert, expert and tile offsets). A slot's
// row is the number of valid slots with a smaller expert plus its rank among the slots of its
// expert: the same rows as plan_small_kernel (by expert, then slot). Up to 32 slots one warp does
// it with shuffles (__match_any_sync); up to kFusedPlanSlots each thread takes slots and counts
// the (expert, slot) keys below theirs in shared memory (O(slots) per slot). Every block repeats
// the plan, so its cost grows as slots x blocks (bench/results/2026-11-27-h100-wide-plan).
struct SmallPlanArgs {
  const int32_t* ids;
  const int32_t* emap;
  int slots;  // <= kFusedPlanSlots
  int E;
  int64_t num_global;
  PlanBuffers plan;
};

struct SmallPlanShared {
  int32_t row_slot[kFusedPlanSlots];
  alignas(16) int32_t expert[kFusedPlanSlots];  // local expert of each slot, < 0: none (-2 past the slots);
                                                // more than 32 slots: the slots' sort keys (small_plan_block)
  int32_t group[kFusedPlanSlots];               // on the first slot of an expert: its slot count, else 0 (one warp)
  int32_t tiles[kFusedPlanSlots];               // block 0, more than 32 slots: tiles of the groups before a row
  int32_t rows;
};

// Block 0's plan arrays for one slot.
__device__ __forceinline__ void write_slot(const SmallPlanArgs& a, int i, int32_t e, int32_t row) {
  a.plan.slot_row[i] = row;
  if (row >= 0) {
    a.plan.row_slot[row] = i;
    a.plan.row_expert[row] = e;
  }
}

// One warp, slots <= 32.
__device__ void small_plan_warp(const SmallPlanArgs& a, SmallPlanShared& sh, bool writer) {
  const int lane = threadIdx.x;
  const int32_t e = lane < a.slots ? local_expert(a.ids, a.emap, lane, a.E, a.num_global) : -2;
  const unsigned same = __match_any_sync(0xffffffffu, e), below = same & ((1u << lane) - 1u);
  int32_t before = 0, valid = 0;
  for (int j = 0; j < 32; ++j) {
    const int32_t ej = __shfl_sync(0xffffffffu, e, j);
    before += (ej >= 0 && ej < e) ? 1 : 0;
    valid += ej >= 0 ? 1 : 0;
  }
  const int32_t row = e >= 0 ? before + __popc(below) : -1;
  if (row >= 0) sh.row_slot[row] = lane;
  sh.expert[lane] = e;
  sh.group[lane] = (e >= 0 && below == 0) ? __popc(same) : 0;
  if (lane == 0) sh.rows = valid;
  if (writer && lane < a.slots) write_slot(a, lane, e, row);
}

// The whole block, 32 < slots <= kFusedPlanSlots. Each slot's sort key is (expert, slot); a valid
// slot's row is the number of valid keys below its own (one compare and add per slot, the keys
// read 4 at a time from shared memory). Block 0's offsets come from the rows in order:
// expert_offsets[e] is the first row whose expert is >= e (binary search), tile_offsets[e] the
// tiles of the expert groups before that row (an exclusive scan over the rows).
static_assert(kFusedPlanSlots <= (1 << kKeySlotBits), "plan keys hold the slot in kKeySlotBits");
static_assert((static_cast<int64_t>(kMaxExperts) << kKeySlotBits) < 0x7FFFFFFF, "plan keys hold the expert");
constexpr int32_t kNoKey = 0x7FFFFFFF;  // invalid slots (and the padding): above every valid key

__device__ void small_plan_block(const SmallPlanArgs& a, SmallPlanShared& sh, bool writer) {
  int32_t* key = sh.expert;  // this path's keys
  const int padded = (a.slots + 3) & ~3;  // whole int4s of keys
  if (threadIdx.x == 0) sh.rows = 0;
  for (int i = threadIdx.x; i < padded; i += blockDim.x) {
    const int32_t e = i < a.slots ? local_expert(a.ids, a.emap, i, a.E, a.num_global) : -1;
    key[i] = e >= 0 ? (e << kKeySlotBits) | i : kNoKey;
  }
  __syncthreads();
  const int4* key4 = reinterpret_cast<const int4*>(key);
  int32_t valid = 0;
  for (int i = threadIdx.x; i < a.slots; i += blockDim.x) {
    const int32_t ki = key[i];
    int32_t below = 0;
    for (int q = 0; q < padded / 4; ++q) {
      const int4 v = key4[q];
      below += (v.x < ki) + (v.y < ki) + (v.z < ki) + (v.w < ki);
    }
    const int32_t row = ki != kNoKey ? below : -1;
    if (row >= 0) sh.row_slot[row] = i;
    valid += row >= 0 ? 1 : 0;
    if (writer) write_slot(a, i, ki != kNoKey ? key_expert(ki) : -1, row);
  }
  if (valid) atomicAdd(&sh.rows, valid);  // an integer count: the order of the adds cannot matter
  __syncthreads();
  if (!writer) return;  // block-uniform
  const int rows = sh.rows;
  auto row_expert = [&](int r) { return key_expert(key[sh.row_slot[r]]); };
  auto first_row_from = [&](int32_t e) {  // first row whose expert is >= e
    int lo = 0, hi = rows;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (row_expert(mid) < e) lo = mid + 1; else hi = mid;
    }
    return lo;
  };
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    const int32_t e = row_expert(r);
    const bool first = r == 0 || row_expert(r - 1) != e;
    sh.tiles[r] = first ? (first_row_from(e + 1) - r + kSimtTileM - 1) / kSimtTileM : 0;
  }
  __syncthreads();
  const int32_t total_tiles = block_exclusive_scan(sh.tiles, rows);
  for (int e = threadIdx.x; e <= a.E; e += blockDim.x) {
    const int lo = first_row_from(e);
    a.plan.expert_offsets[e] = lo;
    a.plan.tile_offsets[e] = lo < rows ? sh.tiles[lo] : total_tiles;
  }
}

__device__ SharedRows small_plan(const SmallPlanArgs& a, SmallPlanShared& sh) {
  const bool writer = blockIdx.x == 0 && blockIdx.y == 0;
  if (a.slots > kWarpPlanSlots) {
    small_plan_block(a, sh, writer);
    __syncthreads();
    return SharedRows{sh.row_slot, sh.expert, true, sh.rows};
  }
  if (threadIdx.x < 32) small_plan_warp(a, sh, writer);
  __syncthreads();
  if (writer) {
    for (int e = threadIdx.x; e <= a.E; e += blockDim.x) {
      int32_t rows = 0, tiles = 0;
      for (int j = 0; j < kWarpPlanSlots; ++j) {
        const int32_t ej = sh.expert[j];
        if (ej >= 0 && ej < e) {
          ++rows;
          tiles += (sh.group[j] + kSimtTileM - 1) / kSimtTileM;  // once per expert (0 elsewhere)
        }
      }
      a.plan.expert_offsets[e] = rows;
      a.plan.tile_offsets[e] = tiles;
    }
  }
  return SharedRows{sh.row_slot, sh.expert, false, sh.rows};
}

// The same plan alone, for decode-sized calls whose gather does not take it (fp8-block and nvfp4
// quantisers, or a GEMM1 that loads weights before it waits: the plan must be two kernels back).
// plan_small_kernel's block-wide count / scan / place took ~7 us at one token, one dependent
// chain of shared-memory steps; this is one warp's shuffles (more than 32 slots: small_plan_block).
__global__ void plan_tiny_kernel(SmallPlanArgs a) {
  chain_wait();
  __shared__ SmallPlanShared sh;
  small_plan(a, sh);
}

__global__ void __launch_bounds__(kVecThreads) plan_gather_vec_kernel(SmallPlanArgs a, GatherParams p) {
  chain_wait();
  __shared__ SmallPlanShared sh;
  gather_vec_rows(p, small_plan(a, sh));
}

template <int kThreads>
__global__ void __launch_bounds__(kThreads) plan_gather_row_vec_kernel(SmallPlanArgs a, GatherParams p) {
  chain_wait();
  __shared__ SmallPlanShared sh;
  gather_row_vec_rows(p, small_plan(a, sh));
}

__global__ void __launch_bounds__(kVecThreads) plan_gather_nvfp4_vec_kernel(SmallPlanArgs a, GatherParams p) {
  chain_wait();
  __shared__ SmallPlanShared sh;
  gather_nvfp4_vec_rows(p, small_plan(a, sh));
}

// NVFP4 (W4A4) for few rows, the plan in the same kernel: each 16-wide block on 16 lanes, one column per lane (the
// block's amax by shuffles within the half-warp), blockIdx.y the row's chunk of 64 blocks on 1024 threads (every block
// of the grid computes the plan, as plan_gather_vec_kernel). plan_gather_nvfp4_vec_kernel gives a 16-wide block to a
// thread (K / 16 of them per row on at most 256 threads: DeepSeek-V3's 7168 columns are 1.75 steps of 16 values each),
// and at one token there are only as many blocks as slots. The same operations per value and the same block max
// (nvfp4_lane_value), so the same values as the vector kernel.
constexpr int kNvfp4GatherLanesThreads = 1024;
__global__ void __launch_bounds__(kNvfp4GatherLanesThreads) plan_gather_nvfp4_lanes_kernel(SmallPlanArgs a, GatherParams p) {
  chain_wait();
  __shared__ SmallPlanShared sh;
  const SharedRows rows = small_plan(a, sh);
  const int64_t blocks = p.K / 16, b = static_cast<int64_t>(blockIdx.y) * (blockDim.x / 16) + threadIdx.x / 16;
  const int64_t n = b * 16 + (threadIdx.x & 15);
  const bool in = b < blocks;  // lanes past the row take part in the shuffles with zeros
  for (int64_t r = blockIdx.x; r < rows.count(); r += gridDim.x) {
    const int64_t i = rows.slot(r), t = i / p.topk;
    const float w = p.on_input ? __ldg(p.topk_weights + i) : 1.0f;
    const float gs = 1.0f / p.nvfp4_input_scale[rows.expert(r)];
    const float v = nvfp4_lane_value(in ? gemm1_value(p, t, w, n) : 0.0f, gs);
    if (in) store_operand(p.out, p.op, r * p.K + n, v, p.korder);
  }
}
// Slots up to which the fused plan + gather of W4A4 takes the lanes kernel (FUSEDMOE_NVFP4_GATHER_LANES=0: never).
constexpr int64_t kNvfp4GatherLanesMaxSlots = 64;
bool nvfp4_gather_lanes(int64_t slots) {
  static const bool on = !env_switch_is_zero("FUSEDMOE_NVFP4_GATHER_LANES");
  return on && slots <= kNvfp4GatherLanesMaxSlots;
}

// NVFP4 activations (W4A4) by the vector kernel (gather_nvfp4_vec_kernel): 16-wide blocks of a
// 16-bit operand.
bool nvfp4_vec_gather_applies(const GatherParams& p) {
  return p.quant == Fp8Quant::NVFP4 && p.op != Operand::FP8 && p.K % 16 == 0 && aligned_to(p.x, 16) &&
         aligned_to(p.out, 16);
}

// Which of the vector gathers serves p.
enum class VecGather { NONE, VEC, ROW };  // VEC: gather_vec_kernel, ROW: gather_row_vec_kernel

// The ROW gathers' block size. A block per row, 8 columns per thread and step: at kVecThreads a thread of a
// 7168-wide row (DeepSeek-V3) walks 3.5 steps twice (amax, then codes), each step's loads a dependent round trip,
// for only as many blocks as rows - at decode sizes (few rows) the stage's length. Up to kRowWideRows rows the
// block has a thread per step (up to kRowWideThreads). FUSEDMOE_ROW_GATHER_WIDE=0: always kVecThreads.
constexpr int kRowWideThreads = 1024;
constexpr int64_t kRowWideRows = 256;
bool row_gather_wide(int64_t rows) {
  static const bool on = !env_switch_is_zero("FUSEDMOE_ROW_GATHER_WIDE");
  return on && rows <= kRowWideRows;
}
VecGather vec_gather_kind(const GatherParams& p) {
  if (p.quant == Fp8Quant::ROW && p.K % 8 == 0 && aligned_to(p.x, 16) &&
      aligned_to(p.out, p.op == Operand::FP8 ? 8 : 16))
    return VecGather::ROW;
  const bool vec_quant = p.quant == Fp8Quant::NONE || p.quant == Fp8Quant::TENSOR_STATIC ||
                         p.quant == Fp8Quant::TENSOR_DYNAMIC;
  const bool vec_op = p.quant == Fp8Quant::NONE ? (p.op == Operand::BF16 || p.op == Operand::FP16) : p.op == Operand::FP8;
  if (vec_quant && vec_op && p.K % 8 == 0 && aligned_to(p.x, 16) && aligned_to(p.out, 16)) return VecGather::VEC;
  return VecGather::NONE;
}

int row_threads(int64_t cols) { return cols >= 1024 ? 256 : 128; }

// FUSEDMOE_WIDE_PLAN=0: the rule before 2026-11-27 for same-binary A/B runs - the plan in one
// block (plan_tiny_kernel, the plan_gather kernels) only up to one warp's 32 slots, and no nvfp4
// gather with the plan inside.
bool narrow_plan() {
  static const bool narrow = env_switch_is_zero("FUSEDMOE_WIDE_PLAN");
  return narrow;
}
// Slots up to which the plan runs in one block of shared-memory steps.
int64_t fused_plan_slots() { return narrow_plan() ? kWarpPlanSlots : kFusedPlanSlots; }

}  // namespace

int64_t plan_chunks(int64_t slots) { return (slots + kChunk - 1) / kChunk; }

void launch_plan(const int32_t* ids, const int32_t* emap, int64_t slots, int E, int64_t num_global,
                 const PlanBuffers& p, cudaStream_t stream) {
  if (slots <= fused_plan_slots()) {  // bench/results/2026-11-22-h100-plan-tiny
    const SmallPlanArgs a{ids, emap, static_cast<int>(slots), E, num_global, p};
    launch_chained(plan_tiny_kernel, 1, slots <= kWarpPlanSlots ? 128 : kFusedPlanSlots, 0, stream, a);
    return;
  }
  if (slots <= kBlockPlanSlots) {
    const int other = E + (slots <= kChunk ? kChunk : 0);
    const int warps = place_warps(E, other);
    const size_t smem = (static_cast<size_t>(other) + static_cast<size_t>(warps) * E) * sizeof(int32_t);
    launch_chained(plan_small_kernel, 1, 32 * warps, smem, stream, ids, emap, slots, E, num_global, p);
    return;
  }
  const int64_t chunks = plan_chunks(slots);
  const size_t smem_e = static_cast<size_t>(E) * sizeof(int32_t);
  launch_chained(plan_count_kernel, static_cast<unsigned>(chunks), 256, smem_e, stream,
                 ids, emap, slots, E, num_global, p);
  launch_chained(plan_scan_kernel, 1, kScanThreads, 2 * smem_e, stream, chunks, E, p);
  const int warps = place_warps(E);
  launch_chained(plan_place_kernel, static_cast<unsigned>(chunks), 32 * warps, smem_e * warps, stream, slots, E, p);
}

void launch_gemm1_amax(const GatherParams& p, int64_t M, int64_t max_rows, float* amax_bits, cudaStream_t stream) {
  FUSEDMOE_CUDA_CHECK(cudaMemsetAsync(amax_bits, 0, sizeof(float), stream));
  if (p.on_input) {
    const dim3 grid(static_cast<unsigned>(max_rows), column_blocks(p.K));
    launch_chained(weighted_rows_amax_kernel, grid, row_threads(p.K), 0, stream, p, amax_bits);
  } else {
    const int64_t n = M * p.K;
    if (n % 8 == 0 && aligned_to(p.x, 16)) {
      const int64_t blocks = std::min<int64_t>((n / 8 + kVecThreads - 1) / kVecThreads, 1024);
      launch_chained(hidden_amax_vec_kernel, static_cast<unsigned>(blocks), kVecThreads, 0, stream, p.x, p.x_dtype, n,
                     amax_bits);
      return;
    }
    const int64_t blocks = std::min<int64_t>((n + 255) / 256, 1024);
    launch_chained(hidden_amax_kernel, static_cast<unsigned>(blocks), 256, 0, stream, p.x, p.x_dtype, n, amax_bits);
  }
}

static bool block_vec_gather_applies(const GatherParams& p) {
  return p.quant == Fp8Quant::BLOCK && p.K % kFp8Block == 0 && aligned_to(p.x, 16) && aligned_to(p.out, 8);
}


bool token_gather_applies(const GatherParams& p) {
  return !p.on_input && p.slot_row != nullptr && p.topk >= 2 && p.M >= kTokenGatherMinTokens &&
         (block_vec_gather_applies(p) || vec_gather_kind(p) != VecGather::NONE ||
          (nvfp4_vec_gather_applies(p) && p.topk <= kTokenNvfp4MaxSlots));
}

bool token_codes_applies(const GatherParams& p) {
  const bool quant = p.quant == Fp8Quant::TENSOR_STATIC ||
                     (p.quant == Fp8Quant::ROW && p.row_scale != nullptr && p.slot_row != nullptr);
  return !p.on_input && quant && p.op == Operand::FP8 && p.K % 8 == 0 && aligned_to(p.x, 16) &&
         aligned_to(p.out, 16) && p.M > 0;
}

void launch_token_codes(const GatherParams& p, cudaStream_t stream) {
  if (!token_codes_applies(p))
    throw Error("permute: token-major fp8 codes asked for a call they do not take (token_codes_applies)");
  if (p.quant == Fp8Quant::ROW)
    launch_chained(gather_token_row_vec_kernel<true>, row_grid(p.M), row_threads8(p.K), 0, stream, p);
  else
    launch_chained(gather_token_vec_kernel<true>, row_grid(p.M), row_threads8(p.K), 0, stream, p);
}

void launch_gather(const GatherParams& p, int64_t max_rows, cudaStream_t stream) {
  if (token_gather_applies(p)) {
    const unsigned grid = row_grid(p.M), threads = row_threads8(p.K);
    if (p.quant == Fp8Quant::BLOCK)
      launch_chained(gather_token_block_vec_kernel, grid, threads, 0, stream, p);
    else if (p.quant == Fp8Quant::NVFP4)
      launch_chained(gather_token_nvfp4_vec_kernel, grid, row_threads8(p.K / 2), 0, stream, p);
    else if (vec_gather_kind(p) == VecGather::ROW)
      launch_chained(gather_token_row_vec_kernel<false>, grid, threads, 0, stream, p);
    else
      launch_chained(gather_token_vec_kernel<false>, grid, threads, 0, stream, p);
    return;
  }
  if (block_vec_gather_applies(p)) {
    launch_chained(gather_block_vec_kernel, row_grid(max_rows), kVecThreads, 0, stream, p);
    return;
  }
  if (vec_gather_kind(p) == VecGather::ROW) {
    if (row_gather_wide(max_rows))
      launch_chained(gather_row_vec_kernel<kRowWideThreads>, row_grid(max_rows), row_threads8(p.K, kRowWideThreads), 0,
                     stream, p);
    else
      launch_chained(gather_row_vec_kernel<kVecThreads>, row_grid(max_rows), row_threads8(p.K), 0, stream, p);
    return;
  }
  if (nvfp4_vec_gather_applies(p)) {
    launch_chained(gather_nvfp4_vec_kernel, row_grid(max_rows), row_threads8(p.K / 2), 0, stream, p);
    return;
  }
  if (p.quant == Fp8Quant::BLOCK) {
    const dim3 grid(static_cast<unsigned>(max_rows), block_quant_grid_y(p.K));
    launch_chained(gather_block_kernel, grid, 32 * kBlockGroupsPerCta, 0, stream, p);
    return;
  }
  if (vec_gather_kind(p) == VecGather::VEC) {
    if (max_rows >= kGatherRowWalkMinRows)
      launch_chained(gather_vec_row_kernel, row_grid(max_rows), row_threads8(p.K), 0, stream, p);
    else
      launch_chained(gather_vec_kernel, vec_grid(max_rows * (p.K / 8)), kVecThreads, 0, stream, p);
    return;
  }
  const bool whole_row = p.quant == Fp8Quant::ROW || p.quant == Fp8Quant::NVFP4;
  const dim3 grid(static_cast<unsigned>(max_rows), whole_row ? 1u : column_blocks(p.K));
  launch_chained(gather_kernel, grid, whole_row ? whole_row_threads(max_rows, p.K) : row_threads(p.K), 0, stream, p);
}

bool plan_gather_fused_applies(const GatherParams& p, int64_t slots) {
  // The amax of router-weighted rows (TENSOR_DYNAMIC with the weight on the input) reads the plan
  // before the gather, so that call keeps the plan kernel.
  const bool amax_needs_plan = p.quant == Fp8Quant::TENSOR_DYNAMIC && p.on_input;
  return slots >= 1 && slots <= fused_plan_slots() && !amax_needs_plan &&
         (vec_gather_kind(p) != VecGather::NONE || (nvfp4_vec_gather_applies(p) && !narrow_plan()));
}

void launch_plan_gather(const int32_t* ids, const int32_t* emap, int64_t slots, int E, int64_t num_global,
                        const PlanBuffers& plan, const GatherParams& p, cudaStream_t stream) {
  if (!plan_gather_fused_applies(p, slots))
    throw Error("plan + gather in one kernel: the call is not one plan_gather_fused_applies() accepts (slots " +
                std::to_string(slots) + ", K " + std::to_string(p.K) + ")");
  const SmallPlanArgs a{ids, emap, static_cast<int>(slots), E, num_global, plan};
  if (nvfp4_vec_gather_applies(p) && nvfp4_gather_lanes(slots)) {
    const int64_t per_cta = kNvfp4GatherLanesThreads / 16;
    const unsigned y = static_cast<unsigned>((p.K / 16 + per_cta - 1) / per_cta);
    launch_chained(plan_gather_nvfp4_lanes_kernel, dim3(row_grid(slots), y), dim3(kNvfp4GatherLanesThreads), 0, stream,
                   a, p);
  } else if (nvfp4_vec_gather_applies(p)) {
    launch_chained(plan_gather_nvfp4_vec_kernel, row_grid(slots), row_threads8(p.K / 2), 0, stream, a, p);
  } else if (vec_gather_kind(p) == VecGather::ROW) {
    if (row_gather_wide(slots))
      launch_chained(plan_gather_row_vec_kernel<kRowWideThreads>, row_grid(slots), row_threads8(p.K, kRowWideThreads),
                     0, stream, a, p);
    else
      launch_chained(plan_gather_row_vec_kernel<kVecThreads>, row_grid(slots), row_threads8(p.K), 0, stream, a, p);
  } else {
    launch_chained(plan_gather_vec_kernel, vec_grid(slots * (p.K / 8)), kVecThreads, 0, stream, a, p);
  }
}

}  // namespace fusedmoe::cuda
