// Activation stage: GEMM1's fp32 output (unscaled for fp8) -> dequant -> + bias1 -> activation
// -> rounded to the activation dtype (the dtype of hidden_states) -> GEMM2's operand
// (conversion, or fp8 quantisation with a static, dynamic per-tensor or per-row scale).
// The steps and their order are the CPU oracle's (cpu_backend.cpp, cpu/activation.hpp).
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.hpp"
#include "cuda/activation_math.cuh"
#include "cuda/env_switch.hpp"
#include "cuda/device_utils.cuh"
#include "cuda/smem_opt_in.hpp"

namespace fusedmoe::cuda {
namespace {

// One block per row and column chunk (ROW quantisation: gridDim.y == 1, the whole row).
__global__ void activation_kernel(ActivationParams p) {
  chain_wait();
  const int64_t r = blockIdx.x;
  if (r >= load_rows(p.rows)) return;
  const int64_t e = p.row_expert[r];
  const int64_t base = r * p.N;
  const ColRange cr = block_columns(p.N);
  switch (p.quant) {
    case Fp8Quant::NONE:
      for (int64_t n = cr.begin + threadIdx.x; n < cr.end; n += blockDim.x)
        store_operand(p.out, p.op, base + n, act_value(p, r, e, n), p.korder);
      return;
    case Fp8Quant::TENSOR_STATIC: {
      const float s = tensor_scale_value(p.scale);
      uint8_t* q = static_cast<uint8_t*>(p.out);
      for (int64_t n = cr.begin + threadIdx.x; n < cr.end; n += blockDim.x)
        q[base + n] = quant_tensor(act_value(p, r, e, n), s);
      return;
    }
    case Fp8Quant::TENSOR_DYNAMIC: {
      // The scale needs every row's amax: stage the values; quantise_staged_kernel follows.
      float m = 0.0f;
      for (int64_t n = cr.begin + threadIdx.x; n < cr.end; n += blockDim.x) {
        const float a = act_value(p, r, e, n);
        p.staging[base + n] = a;
        m = fmaxf(m, abs_for_amax(a));
      }
      m = block_max(m);
      if (threadIdx.x == 0) atomic_max_nonneg(p.amax_bits, m);
      return;
    }
    case Fp8Quant::BLOCK: return;  // activation_block_kernel
    case Fp8Quant::NVFP4:  // whole row (gridDim.y == 1)
      quantise_nvfp4_row(
          p.out, p.op, base, p.N, 1.0f / p.nvfp4_input_scale[e], [&](int64_t n) { return act_value(p, r, e, n); },
          p.korder);
      return;
    case Fp8Quant::ROW: {
      float m = 0.0f;
      for (int64_t n = threadIdx.x; n < p.N; n += blockDim.x) {
        const float a = act_value(p, r, e, n);
        p.staging[base + n] = a;  // read back below by the same thread
        m = fmaxf(m, abs_for_amax(a));
      }
      const float s = scale_from_amax(block_max(m));
      if (threadIdx.x == 0) p.row_scale[r] = s;
      for (int64_t n = threadIdx.x; n < p.N; n += blockDim.x)
        store_row_code(p.out, p.op, base + n, quant_row(p.staging[base + n], s), p.korder);
      return;
    }
  }
}

// fp8-block: one warp per 128-wide group of the activation output (as gather_block_kernel).
__global__ void activation_block_kernel(ActivationParams p) {
  chain_wait();
  const int64_t r = blockIdx.x;
  if (r >= load_rows(p.rows)) return;
  const int64_t g = static_cast<int64_t>(blockIdx.y) * kBlockGroupsPerCta + threadIdx.x / 32;
  if (g * kFp8Block >= p.N) return;
  const int64_t e = p.row_expert[r];
  uint8_t* q = static_cast<uint8_t*>(p.out) + r * p.N;
  quantise_block_group(p.block, r, g, p.N, q, [&](int64_t n) { return act_value(p, r, e, n); });
}

// The 8 activation outputs [n, n + 8) of row r (expert e), rounded to the activation dtype, from
// 16-byte loads of the row's GEMM1 output; ds is the row's dequant factor (TENSOR, GENERIC; the
// CHANNEL factor is per column). Same operations and order as act_value.
__device__ __forceinline__ void act8(const ActivationParams& p, int64_t r, int64_t e, float ds, int64_t n,
                                     float (&a)[8]) {
  auto fix = [&](float v, int64_t col) { return fix_h(p, v, ds, r, e, col); };
  const int64_t h0 = r * p.R;  // the row's first element of h
  if (p.act == Activation::RELU2) {
    float h[8];
    load8_as_float(p.h, DType::F32, h0 + n, h);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float v = fix(h[j], n + j);
      const float c = v > 0.0f ? v : 0.0f;
      a[j] = round_to(p.act_dtype, c * c);
    }
    return;
  }
  const bool gate_first = p.order == GateUpOrder::GATE_UP;
  float g[8], u[8];
  if (p.interleaved) {  // gate / up pairs at columns 2n', 2n' + 1
    float lo[8], hi[8];  // columns 2n .. 2n + 7 and 2n + 8 .. 2n + 15
    load8_as_float(p.h, DType::F32, h0 + 2 * n, lo);
    load8_as_float(p.h, DType::F32, h0 + 2 * n + 8, hi);
    const int go = gate_first ? 0 : 1;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float* c = j < 4 ? lo + 2 * j : hi + 2 * (j - 4);
      g[j] = fix(gate_first ? c[0] : c[1], 2 * (n + j) + go);  // selects, not a register index
      u[j] = fix(gate_first ? c[1] : c[0], 2 * (n + j) + 1 - go);
    }
  } else {
    const int64_t gi = gate_first ? n : p.N + n, ui = gate_first ? p.N + n : n;
    load8_as_float(p.h, DType::F32, h0 + gi, g);
    load8_as_float(p.h, DType::F32, h0 + ui, u);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      g[j] = fix(g[j], gi + j);
      u[j] = fix(u[j], ui + j);
    }
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) a[j] = round_to(p.act_dtype, gated(p, g[j], u[j]));
}

// The row walk of the vector activation kernels: body(r, e, ds) for every row that exists, one
// block per row (grid-stride over the device row count); e the row's expert, ds its per-row
// dequant factor for act8 (TENSOR, GENERIC; the CHANNEL factor is per column).
// early (a kernel that has not waited yet, given ActivationParams::early): the row count, the
// block's first row's expert and factor - the plan's and the previous quantiser's arrays, final when
// the kernel starts - are read before chain_wait(), which every block then reaches (also with no
// row); h only in the body, after it. Kernels that wait first pass false (the same code as before).
template <class Body>
__device__ __forceinline__ void for_each_row(const ActivationParams& p, Body body, bool early = false) {
  const int32_t rows = load_rows(p.rows);
  const float a_tensor = p.dq.kind == Dequant::TENSOR ? tensor_scale_value(p.dq.a_tensor) : 1.0f;
  int64_t r = blockIdx.x;
  if (early) {
    int64_t e = 0;
    float ds = 1.0f;
    if (r < rows) {
      e = __ldg(p.row_expert + r);
      ds = row_factor(p, r, e, a_tensor);
    }
    chain_wait();
    if (r >= rows) return;
    body(r, e, ds);
    r += gridDim.x;
  }
  for (; r < rows; r += gridDim.x) {
    const int64_t e = __ldg(p.row_expert + r);
    body(r, e, row_factor(p, r, e, a_tensor));
  }
}

// fp8-block, N a multiple of 128, no per-column dequant: one block per row and column chunk
// (grid-stride over the rows that exist; gridDim.y chunks of whole groups, several only for few
// rows: at decode sizes one block per row left Mixtral's 14336-wide rows on 2 SMs), half a warp
// per 128-wide group, 8 outputs per lane, at most a chunk's lanes of threads. Values, scales and
// codes as activation_block_kernel.
__global__ void __launch_bounds__(kVecThreads) activation_block_vec_kernel(ActivationParams p) {
  chain_wait();
  const int lanes = static_cast<int>(p.N / 8);
  const int chunk = ((lanes + gridDim.y - 1) / gridDim.y + 31) & ~31;  // whole warps: 2 groups
  const int l_begin = static_cast<int>(blockIdx.y) * chunk, l_end = min(lanes, l_begin + chunk);
  for_each_row(p, [&](int64_t r, int64_t e, float ds) {
    quantise_block_row(
        p.block, r, lanes, static_cast<uint8_t*>(p.out) + r * p.N,
        [&](int l, float (&a)[8]) { act8(p, r, e, ds, static_cast<int64_t>(l) * 8, a); }, l_begin, l_end);
  });
}

// The same quantisation of activation outputs that the fp8-block GEMM1 + activation already wrote
// rounded to bf16 (p.act_bf16, [rows, N]): the values act8 would give, read back exactly, so the
// codes and scales are activation_block_vec_kernel's for the same sums.
__global__ void __launch_bounds__(kVecThreads) quantise_bf16_block_kernel(ActivationParams p) {
  chain_wait();
  const int lanes = static_cast<int>(p.N / 8);
  const int chunk = ((lanes + gridDim.y - 1) / gridDim.y + 31) & ~31;  // whole warps: 2 groups
  const int l_begin = static_cast<int>(blockIdx.y) * chunk, l_end = min(lanes, l_begin + chunk);
  const int32_t rows = load_rows(p.rows);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    quantise_block_row(
        p.block, r, lanes, static_cast<uint8_t*>(p.out) + r * p.N,
        [&](int l, float (&a)[8]) { load8_as_float(p.act_bf16, DType::BF16, r * p.N + static_cast<int64_t>(l) * 8, a); },
        l_begin, l_end);
  }
}

// NVFP4 (W4A4) quantisation of activation outputs the 4-bit wgmma GEMM1 + activation already wrote
// rounded to bf16 (p.act_bf16, [rows, N], N a multiple of 16): the values act8 would give, read
// back exactly, so the operand is activation_nvfp4_vec_kernel's for the same sums. Loops unrolled
// (without the activation's code inlined the body is small; see nvfp4_block_values).
__global__ void __launch_bounds__(kVecThreads) quantise_bf16_nvfp4_kernel(ActivationParams p) {
  chain_wait();
  const int32_t rows = load_rows(p.rows);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t e = __ldg(p.row_expert + r);
    quantise_nvfp4_row_vec(
        p.out, p.op, r * p.N, p.N, 1.0f / p.nvfp4_input_scale[e],
        [&](int64_t c, float (&a)[8]) { load8_as_float(p.act_bf16, DType::BF16, r * p.N + c, a); }, p.korder);
  }
}

// The same quantisation flat over the rows' 16-blocks (rows x N / 16 < 2^31, N a multiple of 64 for
// W4_WGMMA): a thread takes 16-blocks i and i + stride (grid-stride, both loads issued before either
// block's arithmetic), so a thread has 64 bytes in flight instead of one row's 32 while a block walks its
// rows one at a time; with W4_WGMMA the 4 lanes holding a 64-column group's 4 blocks exchange them
// (quad_stored32) and each stores 32 contiguous bytes instead of eight 4-byte words. Same values (the
// same nvfp4_block_values on the same bf16 inputs and global scale), same stored order.
constexpr int kNvfp4FlatThreads = 256;
__global__ void __launch_bounds__(kNvfp4FlatThreads) quantise_bf16_nvfp4_flat_kernel(ActivationParams p) {
  chain_wait();
  __shared__ __align__(16) uint32_t stage[kNvfp4FlatThreads / 32][256];  // quad_stored32's exchange, per warp
  const uint32_t per_row = static_cast<uint32_t>(p.N / 16);
  const int64_t total = static_cast<int64_t>(load_rows(p.rows)) * per_row;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int lane = threadIdx.x & 31;
  const bool wgmma = p.korder == KOrder::W4_WGMMA;
  const uint4* src = reinterpret_cast<const uint4*>(p.act_bf16);
  // Warp-uniform loop (quad_stored32 syncs the warp's live lanes): b0 is the warp's first block index.
  for (int64_t b0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + (threadIdx.x & ~31); b0 < total; b0 += 2 * stride) {
    uint4 raw[2][2];
    float gs[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int64_t i = b0 + u * stride + lane;
      raw[u][0] = raw[u][1] = make_uint4(0u, 0u, 0u, 0u);
      gs[u] = 1.0f;
      if (i < total) {
        const uint32_t r = static_cast<uint32_t>(i) / per_row;
        raw[u][0] = __ldcs(src + 2 * i);
        raw[u][1] = __ldcs(src + 2 * i + 1);
        gs[u] = 1.0f / p.nvfp4_input_scale[__ldg(p.row_expert + r)];
      }
    }
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int64_t w0 = b0 + u * stride;  // the warp's first block of this half (uniform)
      if (w0 >= total) break;
      const int64_t i = w0 + lane;
      float v[16], x[8];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        bf16x8_to_float(raw[u][h], x);
#pragma unroll
        for (int j = 0; j < 8; ++j) v[8 * h + j] = x[j];
      }
      nvfp4_block_values(v, gs[u]);
      float lo[8], hi[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) lo[j] = v[j], hi[j] = v[8 + j];
      if (wgmma) {
        const int64_t live = total - w0;  // a multiple of 4: whole quads (per_row % 4 == 0)
        const unsigned lanes = live >= 32 ? 0xffffffffu : (1u << live) - 1u;
        if (i < total) {
          uint4 st[2];
          quad_stored32(pack8_operand16(p.op, lo), pack8_operand16(p.op, hi), stage[threadIdx.x >> 5], lanes, st);
          uint4* q = reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.out) + ((16 * i) & ~int64_t{63}) + 16 * (i & 3));
          q[0] = st[0], q[1] = st[1];
        }
      } else if (i < total) {
        store8_operand16(p.out, p.op, 16 * i, lo, p.korder);
        store8_operand16(p.out, p.op, 16 * i + 8, hi, p.korder);
      }
    }
  }
}

// ROW quantisation of activation outputs the fp8-channel GEMM1 + activation (or the 4-bit wgmma
// GEMM1 + activation: codes as 16-bit values) already wrote rounded to bf16 (p.act_bf16, [rows, N],
// N a multiple of 8): one block per row (grid-stride), the row's
// amax from a first pass, the codes from a second (the row is in L2): the values, scale and codes
// of activation_row_vec_kernel for the same sums.
__global__ void __launch_bounds__(kVecThreads) quantise_bf16_row_kernel(ActivationParams p) {
  chain_wait();
  const int lanes = static_cast<int>(p.N / 8);
  const int32_t rows = load_rows(p.rows);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float m = 0.0f;
    for (int l = threadIdx.x; l < lanes; l += blockDim.x) {
      float a[8];
      load8_as_float(p.act_bf16, DType::BF16, r * p.N + static_cast<int64_t>(l) * 8, a);
      m = fmaxf(m, amax8(a));
    }
    const float s = scale_from_amax(block_max(m));
    if (threadIdx.x == 0) p.row_scale[r] = s;
    for (int l = threadIdx.x; l < lanes; l += blockDim.x) {
      float a[8];
      load8_as_float(p.act_bf16, DType::BF16, r * p.N + static_cast<int64_t>(l) * 8, a);
      store8_row_codes(p.out, p.op, r * p.N + static_cast<int64_t>(l) * 8, a, s, p.korder);
    }
  }
}

// Warp-per-row forms of the two quantisers above for rows of at most 32 x V 16-byte vectors
// (N <= 256 V: Qwen3-30B-A3B's 768, DeepSeek-V3's 2048 / 256): a warp loads its whole row into
// registers - V loads in flight per lane, issued before any arithmetic - takes the amax with
// shuffles only and quantises from the registers, where the block-per-row kernels wait on a block
// barrier per row (ROW) and read the row a second time. The same values (bf16 bits widened
// exactly), maxima, scales and codes: bitwise their results.
template <int V>
__device__ __forceinline__ void load_row_regs(const ActivationParams& p, int64_t r, int lanes, uint4 (&raw)[V]) {
  const uint4* src = reinterpret_cast<const uint4*>(p.act_bf16 + r * p.N);
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const int l = lane + 32 * v;
    raw[v] = l < lanes ? __ldcs(src + l) : make_uint4(0u, 0u, 0u, 0u);  // zeros: no effect on the amax
  }
}
template <int V>
__global__ void __launch_bounds__(kVecThreads) quantise_bf16_row_warp_kernel(ActivationParams p) {
  chain_wait();
  const int lanes = static_cast<int>(p.N / 8), lane = threadIdx.x & 31;
  const int64_t warps = blockDim.x >> 5;
  const int32_t rows = load_rows(p.rows);
  for (int64_t r = blockIdx.x * warps + (threadIdx.x >> 5); r < rows; r += gridDim.x * warps) {
    uint4 raw[V];
    load_row_regs<V>(p, r, lanes, raw);
    float m = 0.0f;
#pragma unroll
    for (int v = 0; v < V; ++v) {
      float a[8];
      bf16x8_to_float(raw[v], a);
      m = fmaxf(m, amax8(a));
    }
    const float s = scale_from_amax(warp_max(m));
    if (lane == 0) p.row_scale[r] = s;
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const int l = lane + 32 * v;
      if (l < lanes) {
        float a[8];
        bf16x8_to_float(raw[v], a);
        store8_row_codes(p.out, p.op, r * p.N + static_cast<int64_t>(l) * 8, a, s, p.korder);
      }
    }
  }
}
// fp8-block: 16 lanes per 128-wide group (block_scale_half_warp), N a multiple of 128, so a
// half-warp's lanes are all inside the row or all outside.
template <int V>
__global__ void __launch_bounds__(kVecThreads) quantise_bf16_block_warp_kernel(ActivationParams p) {
  chain_wait();
  const int lanes = static_cast<int>(p.N / 8), lane = threadIdx.x & 31;
  const int64_t warps = blockDim.x >> 5;
  const int32_t rows = load_rows(p.rows);
  for (int64_t r = blockIdx.x * warps + (threadIdx.x >> 5); r < rows; r += gridDim.x * warps) {
    uint4 raw[V];
    load_row_regs<V>(p, r, lanes, raw);
    uint8_t* q = static_cast<uint8_t*>(p.out) + r * p.N;
#pragma unroll
    for (int v = 0; v < V; ++v) {
      if (32 * v >= lanes) break;  // warp-uniform
      const int l = lane + 32 * v;
      float a[8];
      bf16x8_to_float(raw[v], a);
      const float s = block_scale_half_warp(amax8(a), p.block.ue8m0);  // every lane: shuffles
      if (l < lanes) {
        *reinterpret_cast<uint2*>(q + static_cast<int64_t>(l) * 8) = block_codes8(a, s);
        if ((l & 15) == 0) p.block.scale[block_scale_index(p.block, r, l / 16, lanes / 16)] = s;
      }
    }
  }
}

// ROW quantisation (per-token fp8: fp8-channel, and the 4-bit formats with fp8 activations), N a
// multiple of 8: one block per row (grid-stride over the rows that exist), 8 outputs per thread
// and step; the rounded outputs wait in shared memory (each read back by the thread that wrote it)
// for the row's amax. They are already rounded to the activation dtype, so a 16-bit dtype stages
// them in 16 bits, exactly: half the shared memory, twice the resident blocks for Mixtral's
// 14336-wide rows (57 KB of fp32 per block allowed 3). Values, scale and codes as
// activation_kernel's ROW case.
__global__ void __launch_bounds__(kVecThreads) activation_row_vec_kernel(ActivationParams p) {
  if (!p.early) chain_wait();  // else in for_each_row (ActivationParams::early)
  extern __shared__ float4 staged[];  // [N] values of the activation dtype
  const int lanes = static_cast<int>(p.N / 8);
  for_each_row(p, [&](int64_t r, int64_t e, float ds) {
    float m = 0.0f;
    for (int l = threadIdx.x; l < lanes; l += blockDim.x) {
      float a[8];
      act8(p, r, e, ds, static_cast<int64_t>(l) * 8, a);
      m = fmaxf(m, amax8(a));
      store8_from_float(staged, p.act_dtype, static_cast<int64_t>(l) * 8, a);
    }
    const float s = scale_from_amax(block_max(m));
    if (threadIdx.x == 0) p.row_scale[r] = s;
    for (int l = threadIdx.x; l < lanes; l += blockDim.x) {
      float a[8];
      load8_as_float(staged, p.act_dtype, static_cast<int64_t>(l) * 8, a);
      store8_row_codes(p.out, p.op, r * p.N + static_cast<int64_t>(l) * 8, a, s, p.korder);
    }
  }, p.early);
}
// Shared memory of activation_row_vec_kernel: rows up to 24576 outputs (Mixtral's 14336 included).
constexpr int kRowStageMaxBytes = 96 * 1024;

// The same for few, long rows: a row's outputs split over the gridDim.y blocks of one
// thread-block cluster (one block per row left Mixtral's 14336-wide rows at M = 1 on 2 SMs, 25 us
// on an H100). Each block stages its part, leaves its amax in shared memory; after a cluster
// barrier every block reads the others' (distributed shared memory): the max of the same values,
// so the row scale and the codes are those of activation_row_vec_kernel.
constexpr int kRowClusterMax = 8;  // the portable cluster size
// The row scale from each block's amax m (the block's part, every thread passing it): block reduction, then the
// cluster's parts through distributed shared memory; block 0's thread 0 stores it as row r's scale. The caller
// cluster-syncs again before part_amax is rewritten (next row) or the block exits.
__device__ __forceinline__ float cluster_row_scale(cooperative_groups::cluster_group& cluster, float& part_amax,
                                                   float m, float* row_scale, int64_t r) {
  m = block_max(m);
  if (threadIdx.x == 0) part_amax = m;
  cluster.sync();  // every block's part_amax written and visible
  float row_max = 0.0f;
  for (unsigned rank = 0; rank < cluster.num_blocks(); ++rank)
    row_max = fmaxf(row_max, *cluster.map_shared_rank(&part_amax, rank));
  const float s = scale_from_amax(row_max);
  if (cluster.block_rank() == 0 && threadIdx.x == 0) row_scale[r] = s;
  return s;
}
__global__ void __launch_bounds__(kVecThreads) activation_row_cluster_kernel(ActivationParams p) {
  if (!p.early) chain_wait();  // else in for_each_row (ActivationParams::early)
  namespace cg = cooperative_groups;
  extern __shared__ float4 staged[];  // [2 * this block's lanes]
  __shared__ float part_amax;
  cg::cluster_group cluster = cg::this_cluster();
  const int lanes = static_cast<int>(p.N / 8), chunk = (lanes + gridDim.y - 1) / gridDim.y;
  const int l_begin = static_cast<int>(blockIdx.y) * chunk, l_end = min(lanes, l_begin + chunk);
  for_each_row(p, [&](int64_t r, int64_t e, float ds) {  // the same rows for every block of a cluster
    float m = 0.0f;
    for (int l = l_begin + threadIdx.x; l < l_end; l += blockDim.x) {
      float a[8];
      act8(p, r, e, ds, static_cast<int64_t>(l) * 8, a);
      m = fmaxf(m, amax8(a));
      staged[2 * (l - l_begin)] = make_float4(a[0], a[1], a[2], a[3]);
      staged[2 * (l - l_begin) + 1] = make_float4(a[4], a[5], a[6], a[7]);
    }
    const float s = cluster_row_scale(cluster, part_amax, m, p.row_scale, r);
    for (int l = l_begin + threadIdx.x; l < l_end; l += blockDim.x) {
      const float4 lo = staged[2 * (l - l_begin)], hi = staged[2 * (l - l_begin) + 1];
      const float a[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      store8_row_codes(p.out, p.op, r * p.N + static_cast<int64_t>(l) * 8, a, s, p.korder);
    }
    cluster.sync();  // no block rewrites part_amax (next row) or exits while others read it
  }, p.early);
}

// ROW for few rows: one output per thread, a row on a cluster of gridDim.y blocks of up to 1024 threads (its amax by
// block reductions and the cluster's distributed shared memory, as activation_row_cluster_kernel). The vector kernels
// give 8 outputs to a thread - 8 gated activations, then 8 divisions - with only a few warps per row at decode sizes.
// The same value per output (act_value is act8's per value), the same max and scale, the same codes.
__global__ void __launch_bounds__(1024) activation_row_lanes_kernel(ActivationParams p) {
  if (!p.early) chain_wait();  // else in for_each_row (ActivationParams::early)
  namespace cg = cooperative_groups;
  __shared__ float part_amax;
  cg::cluster_group cluster = cg::this_cluster();
  const int64_t n = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  const bool in = n < p.N;
  for_each_row(p, [&](int64_t r, int64_t e, float ds) {  // the same rows for every block of a cluster
    const float v = in ? act_value(p, r, e, ds, n) : 0.0f;
    const float s = cluster_row_scale(cluster, part_amax, abs_for_amax(v), p.row_scale, r);
    if (in) store_row_code(p.out, p.op, r * p.N + n, quant_row(v, s), p.korder);
    cluster.sync();  // no block rewrites part_amax (next row) or exits while others read it
  }, p.early);
}
// Rows up to which ROW takes the lanes kernel (FUSEDMOE_ROW_LANES=0: never; rows up to kRowClusterMax x 1024 wide; up
// to 512 rows it measured no clear gain: bench/results/2026-11-28-h200-row-lanes r3).
constexpr int64_t kRowLanesMaxRows = 64;
bool row_lanes_on() {
  static const bool on = !env_switch_is_zero("FUSEDMOE_ROW_LANES");
  return on;
}

// NVFP4 (W4A4), N a multiple of 16, 16-bit operand: one block per row (grid-stride over the rows
// that exist), one 16-wide block per thread and step (act8 twice; loops rolled, see
// nvfp4_block_values). Values as activation_kernel's NVFP4 case.
__global__ void __launch_bounds__(kVecThreads) activation_nvfp4_vec_kernel(ActivationParams p) {
  if (!p.early) chain_wait();  // else in for_each_row (ActivationParams::early)
  for_each_row(p, [&](int64_t r, int64_t e, float ds) {
    quantise_nvfp4_row_vec<true>(
        p.out, p.op, r * p.N, p.N, 1.0f / p.nvfp4_input_scale[e], [&](int64_t c, float (&a)[8]) { act8(p, r, e, ds, c, a); },
        p.korder);
  }, p.early);
}

// NVFP4 (W4A4) for few rows: each 16-wide block on 16 lanes, one output per lane (its amax by shuffles within the
// half-warp), blockIdx.y the row's chunk of kVecThreads / 16 blocks. activation_nvfp4_vec_kernel gives a block to one
// thread, which walks its 16 outputs in a rolled loop: at one token that is a few hundred threads in all, each a long
// dependent chain of gated activations, divisions and roundings (gpt-oss-120b W4A4 one token: the activation stage
// ~14 us). The same operations per output and the same block max (nvfp4_lane_value), so the same codes and values.
__global__ void __launch_bounds__(kVecThreads) activation_nvfp4_lanes_kernel(ActivationParams p) {
  if (!p.early) chain_wait();  // else in for_each_row (ActivationParams::early)
  const int64_t blocks = p.N / 16, b = static_cast<int64_t>(blockIdx.y) * (blockDim.x / 16) + threadIdx.x / 16;
  const int64_t n = b * 16 + (threadIdx.x & 15);
  for_each_row(p, [&](int64_t r, int64_t e, float ds) {
    const bool in = b < blocks;  // lanes past the row take part in the shuffles with zeros
    const float v = nvfp4_lane_value(in ? act_value(p, r, e, ds, n) : 0.0f, 1.0f / p.nvfp4_input_scale[e]);
    if (in) store_operand(p.out, p.op, r * p.N + n, v, p.korder);
  }, p.early);
}
// Rows up to which the activation's NVFP4 quantisation takes the lanes kernel (FUSEDMOE_NVFP4_LANES=0: never).
constexpr int64_t kNvfp4LanesMaxRows = 512;
bool nvfp4_lanes_on() {
  static const bool on = !env_switch_is_zero("FUSEDMOE_NVFP4_LANES");
  return on;
}

__global__ void quantise_staged_kernel(ActivationParams p) {
  chain_wait();
  const int64_t r = blockIdx.x;
  if (r >= load_rows(p.rows)) return;
  const float s = scale_from_amax(*p.amax_bits);
  const int64_t base = r * p.N;
  const ColRange cr = block_columns(p.N);
  uint8_t* q = static_cast<uint8_t*>(p.out);
  for (int64_t n = cr.begin + threadIdx.x; n < cr.end; n += blockDim.x) q[base + n] = quant_tensor(p.staging[base + n], s);
}

// Dynamic per-tensor fp8 (TENSOR_DYNAMIC), N a multiple of 8: the scale needs the amax of every
// row, so the outputs are staged first. One block per row and column chunk (grid-stride over the
// rows that exist; gridDim.y chunks only for few rows, as activation_block_vec_kernel), 8
// outputs per thread and step, staged in the activation dtype (16 bits for bf16 / fp16: exact,
// they are rounded to it), one amax per block (one atomic per block instead of per row);
// quantise_staged_vec_kernel then writes the codes. Values, amax and codes as activation_kernel
// + quantise_staged_kernel, which staged fp32 one element per thread.
__global__ void __launch_bounds__(kVecThreads) activation_dyn_vec_kernel(ActivationParams p) {
  chain_wait();
  const int lanes = static_cast<int>(p.N / 8);
  const int chunk = (lanes + gridDim.y - 1) / gridDim.y;
  const int l_begin = static_cast<int>(blockIdx.y) * chunk, l_end = min(lanes, l_begin + chunk);
  float m = 0.0f;
  for_each_row(p, [&](int64_t r, int64_t e, float ds) {
    for (int l = l_begin + threadIdx.x; l < l_end; l += blockDim.x) {
      const int64_t o = r * p.N + static_cast<int64_t>(l) * 8;
      float a[8];
      act8(p, r, e, ds, static_cast<int64_t>(l) * 8, a);
      m = fmaxf(m, amax8(a));
      store8_from_float(p.staging, p.act_dtype, o, a);
    }
  });
  m = block_max(m);
  if (threadIdx.x == 0 && m > 0.0f) atomic_max_nonneg(p.amax_bits, m);
}

__global__ void __launch_bounds__(kVecThreads) quantise_staged_vec_kernel(ActivationParams p) {
  chain_wait();
  const int64_t items = static_cast<int64_t>(load_rows(p.rows)) * (p.N / 8);
  const float s = scale_from_amax(*p.amax_bits);
  for (int64_t it = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; it < items;
       it += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = it * 8;
    float a[8];
    load8_as_float(p.staging, p.act_dtype, o, a);
    uint8_t q[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) q[j] = quant_tensor(a[j], s);
    *reinterpret_cast<uint2*>(static_cast<uint8_t*>(p.out) + o) =
        make_uint2(pack4_e4m3(q[0], q[1], q[2], q[3]), pack4_e4m3(q[4], q[5], q[6], q[7]));
  }
}

// Vector path (gated activations, gate / up as halves or interleaved, NONE or TENSOR_STATIC
// quantisation, no per-column dequant): one thread per (row, 4 outputs), grid-stride over the rows
// that exist; 16-byte loads of the gate and up values. Same values and rounding as
// activation_kernel. (Interleaved rows ran the general kernel until 2026-11-22: gpt-oss-120b as
// vLLM loads it, activation stage 402 vs 199 us with halves at 4096 tokens, H200.)
__global__ void __launch_bounds__(kVecThreads) activation_vec_kernel(ActivationParams p) {
  chain_wait();
  const int64_t vecs = p.N / 4;
  const int64_t items = static_cast<int64_t>(load_rows(p.rows)) * vecs;
  const bool gate_first = p.order == GateUpOrder::GATE_UP;
  const float a_tensor = p.dq.kind == Dequant::TENSOR ? tensor_scale_value(p.dq.a_tensor) : 1.0f;
  const bool fp8 = p.quant == Fp8Quant::TENSOR_STATIC;
  const float s = fp8 ? tensor_scale_value(p.scale) : 1.0f;
  for (int64_t it = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; it < items;
       it += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = it / vecs, n = (it - r * vecs) * 4;
    float g[4], u[4];
    int64_t gc[4], uc[4];  // the h columns of the four gate / up values (bias index)
    if (p.interleaved) {  // [g0, u0, g1, u1, ..] (or up first): outputs n..n+3 are columns 2n..2n+7
      float v[8];
      load8_as_float(p.h, DType::F32, r * p.R + 2 * n, v);
      const int go = gate_first ? 0 : 1;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        gc[q] = 2 * (n + q) + go;
        uc[q] = 2 * (n + q) + 1 - go;
        g[q] = v[2 * q + go];
        u[q] = v[2 * q + 1 - go];
      }
    } else {
      const int64_t gi = gate_first ? n : p.N + n, ui = gate_first ? p.N + n : n;
      load4_as_float(p.h, DType::F32, r * p.R + gi, g);
      load4_as_float(p.h, DType::F32, r * p.R + ui, u);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        gc[q] = gi + q;
        uc[q] = ui + q;
      }
    }
    const int64_t e = __ldg(p.row_expert + r);
    const float ds = row_factor(p, r, e, a_tensor);
    float a[4];
#pragma unroll
    for (int q = 0; q < 4; ++q)
      a[q] = round_to(p.act_dtype, gated(p, fix_h(p, g[q], ds, r, e, gc[q]), fix_h(p, u[q], ds, r, e, uc[q])));
    const int64_t o = r * p.N + n;
    if (!fp8) {
      if (p.korder != KOrder::NATURAL) {
#pragma unroll
        for (int q = 0; q < 4; ++q) store_operand(p.out, p.op, o + q, a[q], p.korder);
      } else {
        store4_from_float(p.out, p.op == Operand::BF16 ? DType::BF16 : DType::F16, o, a);
      }
    } else {
      *reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(p.out) + o) =
          quant_tensor(a[0], s) | (quant_tensor(a[1], s) << 8) | (quant_tensor(a[2], s) << 16) |
          (static_cast<uint32_t>(quant_tensor(a[3], s)) << 24);
    }
  }
}

}  // namespace

// nvfp4_flat_test_grid (tests): > 0 the flat nvfp4 quantiser with at most that many blocks, < 0 the row kernel, 0
// the rule (flat unless FUSEDMOE_NVFP4_FLAT=0).
static int g_nvfp4_flat_grid = 0;
void nvfp4_flat_test_grid(int cap) { g_nvfp4_flat_grid = cap; }

// Column chunks (gridDim.y) of the row-walking kernels that split rows: one per pass of a block
// (2048 outputs) while the rows are too few to fill the GPU with one block each, else 1.
unsigned row_column_chunks(int64_t max_rows, int64_t n) {
  const int64_t chunks = (n + kVecThreads * 8 - 1) / (kVecThreads * 8);
  return max_rows * chunks <= 4096 ? static_cast<unsigned>(chunks) : 1u;
}

// The warp-per-row quantisers of bf16 activation rows (ROW or BLOCK; the caller checked the
// format's shape and alignment): ROW rows of at most 2048 values, BLOCK rows of at most 1024, and
// enough rows to fill the GPU with warps (kWarpRowsMinRows; decode-sized calls keep the block
// kernels, whose BLOCK form splits a row over several blocks). False: not taken. Four warps (rows)
// per block. Same-binary A/B, H100 (bench/results/2026-11-27-h100-warp-rows): activation stage
// fp8-channel Qwen3-30B-A3B 4096 tokens 39 -> 30 us, DeepSeek-V3 TP1 95 -> 83, TP8 18 -> 13;
// fp8-block Qwen3 38 -> 34.5, DeepSeek-V3 TP8 18 -> 14, but DeepSeek-V3 TP1's 2048-wide fp8-block
// rows 26 -> 29 us at 1024 tokens (eight groups per lane in sequence, each with its shuffles and
// divisions): BLOCK stays on the block kernel there.
static constexpr int64_t kWarpRowsMinRows = 512;
// FUSEDMOE_WARP_ROWS=0 in the environment (read once) keeps the block kernels: a diagnostic
// switch for same-binary A/B runs.
static bool launch_bf16_rows_warp_kernel(const ActivationParams& p, int64_t max_rows, cudaStream_t stream) {
  static const bool off = env_switch_is_zero("FUSEDMOE_WARP_ROWS");
  const int64_t lanes = p.N / 8;
  const int64_t max_lanes = p.quant == Fp8Quant::ROW ? 256 : 128;
  if (off || max_rows < kWarpRowsMinRows || lanes > max_lanes || !aligned_to(p.act_bf16, 16)) return false;
  constexpr int kWarps = 4;
  const unsigned grid = row_grid((max_rows + kWarps - 1) / kWarps);
  const bool row = p.quant == Fp8Quant::ROW;
#define FMOE_WARP_ROWS(V)                                                                                  \
  launch_chained(row ? quantise_bf16_row_warp_kernel<V> : quantise_bf16_block_warp_kernel<V>, grid, 32 * kWarps, \
                 0, stream, p)
  if (lanes <= 32) FMOE_WARP_ROWS(1);
  else if (lanes <= 64) FMOE_WARP_ROWS(2);
  else if (lanes <= 128) FMOE_WARP_ROWS(4);
  else FMOE_WARP_ROWS(8);
#undef FMOE_WARP_ROWS
  return true;
}

void launch_activation(const ActivationParams& p, int64_t max_rows, cudaStream_t stream) {
  const bool rows_fit = p.act == Activation::RELU2 ? p.R == p.N : p.R == 2 * p.N;
  if (p.act_bf16 && p.quant == Fp8Quant::NVFP4) {
    if (p.op == Operand::FP8 || p.N % 16 != 0 || !aligned_to(p.act_bf16, 16) || !aligned_to(p.out, 16))
      throw Error("activation: bf16 activation rows are quantised to nvfp4 with a 16-bit operand, N a multiple of 16 and aligned pointers");
    static const bool flat_on = !env_switch_is_zero("FUSEDMOE_NVFP4_FLAT");
    const int64_t max_blocks16 = max_rows * (p.N / 16);
    const bool flat_fits = max_blocks16 < (int64_t{1} << 31) && (p.korder != KOrder::W4_WGMMA || p.N % 64 == 0);
    if (flat_fits && (g_nvfp4_flat_grid > 0 || (flat_on && g_nvfp4_flat_grid == 0))) {
      const int64_t grid = (max_blocks16 + 2 * kNvfp4FlatThreads - 1) / (2 * kNvfp4FlatThreads);
      const int64_t cap = g_nvfp4_flat_grid > 0 ? g_nvfp4_flat_grid : 4096;
      launch_chained(quantise_bf16_nvfp4_flat_kernel, static_cast<unsigned>(std::clamp<int64_t>(grid, 1, cap)),
                     kNvfp4FlatThreads, 0, stream, p);
      return;
    }
    launch_chained(quantise_bf16_nvfp4_kernel, row_grid(max_rows), row_threads8(p.N / 2), 0, stream, p);
    return;
  }
  if (p.act_bf16 && p.quant == Fp8Quant::ROW) {
    if (p.N % 8 != 0 || !aligned_to(p.act_bf16, 16) || !aligned_to(p.out, p.op == Operand::FP8 ? 8 : 16))
      throw Error("activation: bf16 activation rows are quantised per row with N a multiple of 8 and aligned pointers");
    if (launch_bf16_rows_warp_kernel(p, max_rows, stream)) return;
    launch_chained(quantise_bf16_row_kernel, row_grid(max_rows), row_threads8(p.N), 0, stream, p);
    return;
  }
  if (p.act_bf16 && (p.quant != Fp8Quant::BLOCK || p.N % kFp8Block != 0 || !aligned_to(p.act_bf16, 16) ||
                     !aligned_to(p.out, 8)))
    throw Error("activation: bf16 activation rows are quantised for fp8-block only (N a multiple of 128, aligned)");
  if (p.act_bf16 && launch_bf16_rows_warp_kernel(p, max_rows, stream)) return;
  // (bf16 rows: otherwise quantise_bf16_block_kernel on the same launch shape as the activation kernel.)
  if (p.quant == Fp8Quant::BLOCK && p.N % kFp8Block == 0 && aligned_to(p.out, 8) &&
      (p.act_bf16 || (rows_fit && p.dq.kind != Dequant::CHANNEL && aligned_to(p.h, 16)))) {
    const unsigned y = row_column_chunks(max_rows, p.N);
    // No more threads than a block's chunk has lanes (whole warps, as the kernel's chunk): a
    // 256-wide row (DeepSeek-V3 TP8) is one warp's work, and 256 threads left 7 of 8 warps idle.
    const int64_t lanes = p.N / 8, chunk = ((lanes + y - 1) / y + 31) / 32 * 32;
    const unsigned threads = static_cast<unsigned>(std::min<int64_t>(kVecThreads, chunk));
    launch_chained(p.act_bf16 ? quantise_bf16_block_kernel : activation_block_vec_kernel, dim3(row_grid(max_rows), y),
                   threads, 0, stream, p);
    return;
  }
  if (p.quant == Fp8Quant::ROW && p.N % 8 == 0 && p.N * 4 <= kRowStageMaxBytes && rows_fit && aligned_to(p.h, 16) &&
      aligned_to(p.out, p.op == Operand::FP8 ? 8 : 16)) {
    if (max_rows <= kRowLanesMaxRows && p.N <= kRowClusterMax * 1024 && row_lanes_on()) {
      const int64_t y = (p.N + 1023) / 1024, threads = ((p.N + y - 1) / y + 31) / 32 * 32;
      launch_chained_clusters(activation_row_lanes_kernel, dim3(row_grid(max_rows), static_cast<unsigned>(y)),
                              static_cast<unsigned>(threads), 0, stream, dim3(1, static_cast<unsigned>(y), 1), p);
      return;
    }
    // Few rows of more than one pass of the block: a cluster of blocks per row, each one pass.
    const int64_t lanes = p.N / 8;
    const int64_t y = std::min<int64_t>(kRowClusterMax, (lanes + kVecThreads - 1) / kVecThreads);
    if (y > 1 && max_rows * y <= 1024) {
      const int64_t chunk = (lanes + y - 1) / y;
      launch_chained_clusters(activation_row_cluster_kernel, dim3(row_grid(max_rows), static_cast<unsigned>(y)),
                              row_threads8(chunk * 8), static_cast<size_t>(chunk) * 32, stream,
                              dim3(1, static_cast<unsigned>(y), 1), p);
      return;
    }
    opt_in_dynamic_smem<activation_row_vec_kernel>(kRowStageMaxBytes);
    launch_chained(activation_row_vec_kernel, row_grid(max_rows), row_threads8(p.N),
                   static_cast<size_t>(p.N) * (p.act_dtype == DType::F32 ? 4 : 2), stream, p);
    return;
  }
  if (p.quant == Fp8Quant::NVFP4 && p.op != Operand::FP8 && p.N % 16 == 0 && rows_fit && aligned_to(p.h, 16) &&
      aligned_to(p.out, 16)) {
    if (max_rows <= kNvfp4LanesMaxRows && nvfp4_lanes_on()) {
      const int64_t per_cta = kVecThreads / 16;
      const unsigned y = static_cast<unsigned>((p.N / 16 + per_cta - 1) / per_cta);
      launch_chained(activation_nvfp4_lanes_kernel, dim3(row_grid(max_rows), y), dim3(kVecThreads), 0, stream, p);
      return;
    }
    launch_chained(activation_nvfp4_vec_kernel, row_grid(max_rows), row_threads8(p.N / 2), 0, stream, p);
    return;
  }
  if (p.quant == Fp8Quant::BLOCK) {
    const dim3 grid(static_cast<unsigned>(max_rows), block_quant_grid_y(p.N));
    launch_chained(activation_block_kernel, grid, 32 * kBlockGroupsPerCta, 0, stream, p);
    return;
  }
  const bool vec_op = p.quant == Fp8Quant::NONE ? (p.op == Operand::BF16 || p.op == Operand::FP16)
                                                : (p.quant == Fp8Quant::TENSOR_STATIC && p.op == Operand::FP8);
  if (vec_op && p.act != Activation::RELU2 && p.dq.kind != Dequant::CHANNEL && p.N % 4 == 0 &&
      p.R == 2 * p.N && aligned_to(p.h, 16) && aligned_to(p.out, 8)) {
    launch_chained(activation_vec_kernel, vec_grid(max_rows * (p.N / 4)), kVecThreads, 0, stream, p);
    return;
  }
  if (p.quant == Fp8Quant::TENSOR_DYNAMIC && p.op == Operand::FP8 && p.N % 8 == 0 && rows_fit && aligned_to(p.h, 16) &&
      aligned_to(p.out, 8) && aligned_to(p.staging, 16)) {
    FUSEDMOE_CUDA_CHECK(cudaMemsetAsync(p.amax_bits, 0, sizeof(float), stream));
    const unsigned y = row_column_chunks(max_rows, p.N);
    launch_chained(activation_dyn_vec_kernel, dim3(row_grid(max_rows), y), row_threads8((p.N / 8 + y - 1) / y * 8), 0,
                   stream, p);
    launch_chained(quantise_staged_vec_kernel, vec_grid(max_rows * (p.N / 8)), kVecThreads, 0, stream, p);
    return;
  }
  // NONE / static fp8 with relu2 stay on activation_kernel (interleaved gate / up rows take
  // activation_vec_kernel since 2026-11-22, bench/results/2026-11-22-h200-w4-kernel-diet-ab section 10).
  const bool whole_row = p.quant == Fp8Quant::ROW || p.quant == Fp8Quant::NVFP4;
  const int threads = whole_row ? whole_row_threads(max_rows, p.N) : (p.N >= 1024 ? 256 : 128);
  const dim3 grid(static_cast<unsigned>(max_rows), whole_row ? 1u : column_blocks(p.N));
  if (p.quant == Fp8Quant::TENSOR_DYNAMIC) FUSEDMOE_CUDA_CHECK(cudaMemsetAsync(p.amax_bits, 0, sizeof(float), stream));
  launch_chained(activation_kernel, grid, threads, 0, stream, p);
  if (p.quant == Fp8Quant::TENSOR_DYNAMIC) {
    launch_chained(quantise_staged_kernel, grid, threads, 0, stream, p);
  }
}

}  // namespace fusedmoe::cuda
