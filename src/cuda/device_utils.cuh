#pragma once
// Device helpers shared by the elementwise stages: dtype conversions with the exact rounding of
// the CPU codecs (round to nearest even; e4m3 saturating to +-448), fp8 scale formulas, and
// block-wide reductions. All conversions go through cuda_bf16.h / cuda_fp16.h / cuda_fp8.h,
// which the CPU codecs are bit-exact with.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "cuda/moe_kernels.hpp"
#include "cuda/nvfp4_round.cuh"
#include "cuda/w4_kperm.cuh"

namespace fusedmoe::cuda {

constexpr float kFp8Max = 448.0f;
constexpr float kMinAmax = 1e-10f;

__device__ __forceinline__ float load_as_float(const void* p, DType d, int64_t i) {
  switch (d) {
    case DType::BF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case DType::F16: return __half2float(static_cast<const __half*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

// Rounds to the activation dtype (bf16 / fp16 / fp32), as the CPU's round_to().
__device__ __forceinline__ float round_to(DType d, float v) {
  switch (d) {
    case DType::BF16: return __bfloat162float(__float2bfloat16_rn(v));
    case DType::F16: return __half2float(__float2half_rn(v));
    default: return v;
  }
}

__device__ __forceinline__ void store_from_float(void* p, DType d, int64_t i, float v) {
  switch (d) {
    case DType::BF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    case DType::F16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

__device__ __forceinline__ uint8_t to_e4m3(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

// Per-tensor quantisation step of quantize_fp8_with_scale: 0 stays 0 even when s == 0.
__device__ __forceinline__ uint8_t quant_tensor(float v, float s) { return to_e4m3(v == 0.0f ? v : __fdiv_rn(v, s)); }
// quant_tensor's value without the division's slow-path branch, for loops over many outputs of one
// scale (the fused GEMM1 epilogue; per-token fp8 codes, pack8_row_codes): inv_s = __frcp_rn(s), the
// correctly rounded reciprocal. q0 = v * inv_s is within an ulp of v / s, and one fma correction with
// the correctly rounded reciprocal makes it the correctly rounded quotient (Markstein) - the same bits
// as __fdiv_rn - unless it overflows, where e4m3 saturates either way (q0 = inf; also s == 0; s = Inf:
// v / s = +-0 = q0). Zeros keep their sign (v itself). Exact while 1 / s is a normal float, s <= 2^126:
// the scales from an amax / 448 always are; at s = FLT_MAX 2 of 2^32 codes differ (tests/gpu/
// test_e2m1_device_gpu.cu checks every fp32 v for a set of scales).
__device__ __forceinline__ uint8_t quant_tensor_rcp(float v, float s, float inv_s) {
  const float q0 = __fmul_rn(v, inv_s);
  const float q = __fmaf_rn(__fmaf_rn(-s, q0, v), inv_s, q0);
  return to_e4m3(v == 0.0f ? v : (isfinite(q) ? q : q0));
}
// Per-row step of quantize_fp8_per_row.
__device__ __forceinline__ uint8_t quant_row(float v, float s) { return to_e4m3(__fdiv_rn(v, s)); }
__device__ __forceinline__ float scale_from_amax(float amax) { return __fdiv_rn(fmaxf(amax, kMinAmax), kFp8Max); }

// round_up_pow2 of the CPU codecs (fp8_block_ue8m0): the smallest power of two >= x for a positive
// finite x; zero, negatives, NaN and Inf unchanged.
__device__ __forceinline__ float round_up_pow2(float x) {
  if (!(x > 0.0f) || isinf(x)) return x;
  int ex = 0;
  const float m = frexpf(x, &ex);
  return ldexpf(1.0f, m == 0.5f ? ex - 1 : ex);
}

__device__ __forceinline__ float tensor_scale_value(const TensorScale& s) {
  const float v = *s.ptr;
  return s.from_amax ? scale_from_amax(v) : v;
}

// Operand store for the 16/32-bit operands (the fp8 ones go through quant_*). ko: a 16-bit operand
// of a 4-bit kernel, stored in its k order (w4_kperm.cuh).
__device__ __forceinline__ void store_operand(void* p, Operand op, int64_t i, float v, KOrder ko = KOrder::NATURAL) {
  i = korder_pos(i, ko);
  switch (op) {
    case Operand::BF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    case Operand::FP16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    case Operand::FP32: static_cast<float*>(p)[i] = v; break;
    case Operand::FP8: static_cast<uint8_t*>(p)[i] = to_e4m3(v); break;
  }
}

// |v| for an amax that skips NaN (as the CPU quantisers: a NaN compares false).
__device__ __forceinline__ float abs_for_amax(float v) { return v == v ? fabsf(v) : 0.0f; }

// Non-negative floats order like their bit patterns, so an integer atomicMax is an exact,
// order-independent float max (the result does not depend on which block comes first).
__device__ __forceinline__ void atomic_max_nonneg(float* addr, float v) {
  atomicMax(reinterpret_cast<unsigned int*>(addr), __float_as_uint(v));
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide max (blockDim.x a multiple of 32, <= 1024). All threads get the result.
__device__ __forceinline__ float block_max(float v) {
  __shared__ float warp_vals[32];
  __shared__ float result;
  v = warp_max(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_vals[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int nwarps = blockDim.x >> 5;
    float w = lane < nwarps ? warp_vals[lane] : 0.0f;
    w = warp_max(w);
    if (lane == 0) result = w;
  }
  __syncthreads();
  return result;
}

// fp8-block: 128-wide column groups per row.
constexpr int kFp8Block = 128;

// Index of the scale of (row r, group g) in the BLOCK scale layout (moe_kernels.hpp).
__device__ __forceinline__ int64_t block_scale_index(const BlockScaleOut& b, int64_t r, int64_t g, int64_t groups) {
  const int32_t e = b.row_expert[r];
  const int64_t row0 = b.expert_offsets[e];
  const int64_t rows_e = b.expert_offsets[e + 1] - row0;
  return row0 * groups + g * rows_e + (r - row0);
}

// Quantises group g (columns [g*128, min(cols, g*128+128))) of row r with one warp, as
// quantize_fp8_per_token_group: s = max(amax, 1e-10) / 448 (ue8m0: round_up_pow2(s)),
// q = e4m3(v / s). value(c) gives the operand value of column c; q points at the row.
template <class Value>
__device__ __forceinline__ void quantise_block_group(const BlockScaleOut& b, int64_t r, int64_t g, int64_t cols,
                                                     uint8_t* q, Value value) {
  constexpr int kPer = kFp8Block / 32;
  const int lane = threadIdx.x & 31;
  const int64_t c0 = g * kFp8Block;
  float v[kPer];
  float m = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int64_t c = c0 + j * 32 + lane;
    v[j] = c < cols ? value(c) : 0.0f;
    m = fmaxf(m, abs_for_amax(v[j]));
  }
  m = warp_max(m);
  float s = __fdiv_rn(fmaxf(m, kMinAmax), kFp8Max);
  if (b.ue8m0) s = round_up_pow2(s);
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int64_t c = c0 + j * 32 + lane;
    if (c < cols) q[c] = to_e4m3(__fdiv_rn(v[j], s));
  }
  if (lane == 0) b.scale[block_scale_index(b, r, g, (cols + kFp8Block - 1) / kFp8Block)] = s;
}

// Vector form of the same quantiser for rows whose width is a multiple of 128: half a warp
// (16 lanes) per group, 8 consecutive columns per lane (16-byte loads, 8-byte code stores), one
// block walking whole rows, so no per-element index arithmetic. The max is order-independent and
// each code is the same division, so scales and codes are bitwise those of quantise_block_group.
// All 32 lanes must call it (shuffles); a lane outside the row passes m = 0 and its half-warp
// is wholly outside (widths are multiples of 128 = 16 lanes x 8).
__device__ __forceinline__ float block_scale_half_warp(float m, bool ue8m0) {
  for (int o = 8; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  const float s = __fdiv_rn(fmaxf(m, kMinAmax), kFp8Max);
  return ue8m0 ? round_up_pow2(s) : s;
}
__device__ __forceinline__ float amax8(const float (&v)[8]) {
  float m = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) m = fmaxf(m, abs_for_amax(v[j]));
  return m;
}
__device__ __forceinline__ uint2 block_codes8(const float (&v)[8], float s) {
  uint32_t w[2] = {0u, 0u};
#pragma unroll
  for (int j = 0; j < 8; ++j) w[j / 4] |= static_cast<uint32_t>(to_e4m3(__fdiv_rn(v[j], s))) << (8 * (j % 4));
  return make_uint2(w[0], w[1]);
}

// One row of `lanes` x 8 values (a multiple of 128) quantised by the whole block with the vector
// quantiser above: load(l, v) fills v with columns 8l .. 8l + 7 (called only for l < lanes);
// store(l, codes, s) takes the codes of those columns and their group's scale (quantise_block_row:
// the codes to qrow, the group scales to b as row r). Whole warps iterate while their first lane is
// inside the row, since block_scale_half_warp's shuffles need all 32 lanes. [l_begin, l_end): the
// part of the row this block takes (l_begin a multiple of 32: whole groups per half-warp).
template <class Load8, class Store8>
__device__ __forceinline__ void quantise_block_lanes(int lanes, bool ue8m0, Load8 load, Store8 store, int l_begin = 0,
                                                     int l_end = -1) {
  if (l_end < 0) l_end = lanes;
  for (int l0 = l_begin + (threadIdx.x & ~31); l0 < l_end; l0 += blockDim.x) {
    const int l = l0 + (threadIdx.x & 31);
    const bool in = l < l_end;
    float v[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (in) load(l, v);
    const float s = block_scale_half_warp(amax8(v), ue8m0);
    if (in) store(l, block_codes8(v, s), s);  // s: the scale of group l / 16
  }
}
template <class Load8>
__device__ __forceinline__ void quantise_block_row(const BlockScaleOut& b, int64_t r, int lanes, uint8_t* qrow,
                                                   Load8 load, int l_begin = 0, int l_end = -1) {
  quantise_block_lanes(
      lanes, b.ue8m0, load,
      [&](int l, uint2 codes, float s) {
        *reinterpret_cast<uint2*>(qrow + static_cast<int64_t>(l) * 8) = codes;
        if ((l & 15) == 0) b.scale[block_scale_index(b, r, l / 16, lanes / 16)] = s;
      },
      l_begin, l_end);
}

// Launch shape of the BLOCK quantisers: one warp per group, kBlockGroupsPerCta groups per block.
constexpr int kBlockGroupsPerCta = 8;
inline unsigned block_quant_grid_y(int64_t cols) {
  const int64_t groups = (cols + kFp8Block - 1) / kFp8Block;
  return static_cast<unsigned>((groups + kBlockGroupsPerCta - 1) / kBlockGroupsPerCta);
}

__device__ __forceinline__ int32_t load_rows(const int32_t* rows) { return *rows; }

// The row kernels split a row's columns over gridDim.y blocks (few rows, e.g. decode, would
// otherwise leave most SMs idle); gridDim.y == 1 gives a block the whole row (per-row amax).
struct ColRange {
  int64_t begin, end;
};
__device__ __forceinline__ ColRange block_columns(int64_t cols) {
  const int64_t chunk = (cols + gridDim.y - 1) / gridDim.y;
  const int64_t b = static_cast<int64_t>(blockIdx.y) * chunk;
  return {b, b + chunk < cols ? b + chunk : cols};
}

// Host side: column chunks for a row kernel over `rows` rows of `cols` columns.
constexpr int64_t kColsPerBlock = 2048;
inline unsigned column_blocks(int64_t cols) {
  return static_cast<unsigned>((cols + kColsPerBlock - 1) / kColsPerBlock);
}
// Threads of a block that must cover a whole row (per-row amax): more when rows are few.
inline int whole_row_threads(int64_t rows, int64_t cols) {
  if (rows <= 256 && cols >= 2048) return 1024;
  return cols >= 1024 ? 256 : 128;
}

// ---- vectorised row kernels ----
// The vector kernels run a bounded grid that strides over (row, 4- or 8-column vector) items,
// so a launch for the upper bound of rows costs no empty blocks, and each thread moves 8-16
// bytes per access with its loads batched ahead of the arithmetic.
constexpr int kVecThreads = 256;
inline unsigned vec_grid(int64_t items) {
  constexpr int64_t kMaxBlocks = 2048;  // ~8 blocks per SM on a 132-SM H100/H200, grid-stride beyond
  const int64_t b = (items + kVecThreads - 1) / kVecThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b < kMaxBlocks ? b : kMaxBlocks));
}
// Row-walking kernels (one block per row, grid-stride over the rows that exist): enough blocks
// to fill the GPU several times over, never more than the rows.
inline unsigned row_grid(int64_t max_rows) {
  constexpr int64_t kMaxBlocks = 4096;
  return static_cast<unsigned>(max_rows < 1 ? 1 : (max_rows < kMaxBlocks ? max_rows : kMaxBlocks));
}
// Threads of a row-walking kernel whose threads take 8 columns each: whole warps, no more than
// the row needs (a 256-wide row is one warp, not 256 threads of which 224 idle), at most max_threads.
inline unsigned row_threads8(int64_t cols, int max_threads = kVecThreads) {
  const int64_t warps = (cols / 8 + 31) / 32;
  return static_cast<unsigned>(32 * (warps < 1 ? 1 : (warps < max_threads / 32 ? warps : max_threads / 32)));
}
inline bool aligned_to(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

// Loads 4 values of an F32 or BF16 array at elements [i, i + 4) (aligned to 4 elements), through
// the read-only cache.
__device__ __forceinline__ void load4_as_float(const void* p, DType d, int64_t i, float (&v)[4]) {
  if (d == DType::BF16) {
    const uint2 u = __ldg(reinterpret_cast<const uint2*>(static_cast<const __nv_bfloat16*>(p) + i));
    v[0] = __uint_as_float(u.x << 16);
    v[1] = __uint_as_float(u.x & 0xffff0000u);
    v[2] = __uint_as_float(u.y << 16);
    v[3] = __uint_as_float(u.y & 0xffff0000u);
  } else {
    const float4 f = __ldg(reinterpret_cast<const float4*>(static_cast<const float*>(p) + i));
    v[0] = f.x;
    v[1] = f.y;
    v[2] = f.z;
    v[3] = f.w;
  }
}

// Stores 4 values (rounded as store_from_float) at elements [i, i + 4) (i a multiple of 4, the
// pointer aligned to 4 elements).
__device__ __forceinline__ void store4_from_float(void* p, DType d, int64_t i, const float (&v)[4]) {
  switch (d) {
    case DType::BF16: {
      __nv_bfloat162 a = __floats2bfloat162_rn(v[0], v[1]), b = __floats2bfloat162_rn(v[2], v[3]);
      uint2 u;
      u.x = *reinterpret_cast<uint32_t*>(&a);
      u.y = *reinterpret_cast<uint32_t*>(&b);
      *reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(p) + i) = u;
      break;
    }
    case DType::F16: {
      __half2 a = __floats2half2_rn(v[0], v[1]), b = __floats2half2_rn(v[2], v[3]);
      uint2 u;
      u.x = *reinterpret_cast<uint32_t*>(&a);
      u.y = *reinterpret_cast<uint32_t*>(&b);
      *reinterpret_cast<uint2*>(static_cast<__half*>(p) + i) = u;
      break;
    }
    default: *reinterpret_cast<float4*>(static_cast<float*>(p) + i) = make_float4(v[0], v[1], v[2], v[3]); break;
  }
}

// Loads 8 values of a BF16 / F16 / F32 array at elements [i, i + 8) (aligned to 8 elements).
// The 8 bf16 values packed in u (low half of each word first) widened exactly to fp32 (the bf16
// case of load8_as_float below, for values already in registers).
__device__ __forceinline__ void bf16x8_to_float(const uint4 u, float (&v)[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    v[2 * j] = __uint_as_float(w[j] << 16);
    v[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
  }
}
__device__ __forceinline__ void load8_as_float(const void* p, DType d, int64_t i, float (&v)[8]) {
  if (d == DType::F32) {
    const float4 a = *reinterpret_cast<const float4*>(static_cast<const float*>(p) + i);
    const float4 b = *reinterpret_cast<const float4*>(static_cast<const float*>(p) + i + 4);
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
    return;
  }
  const uint4 u = *reinterpret_cast<const uint4*>(static_cast<const char*>(p) + i * 2);
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (d == DType::BF16) {
      v[2 * j] = __uint_as_float(w[j] << 16);
      v[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
    } else {
      __half2 h = *reinterpret_cast<const __half2*>(&w[j]);
      const float2 f = __half22float2(h);
      v[2 * j] = f.x;
      v[2 * j + 1] = f.y;
    }
  }
}

// 8 operand values as a BF16 / FP16 operand stores them (16 bytes), as store_operand.
__device__ __forceinline__ uint4 pack8_operand16(Operand op, const float (&v)[8]) {
  uint32_t w[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (op == Operand::BF16) {
      __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * j], v[2 * j + 1]);
      w[j] = *reinterpret_cast<uint32_t*>(&h);
    } else {
      __half2 h = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
      w[j] = *reinterpret_cast<uint32_t*>(&h);
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}
// Stores 8 operand values at elements [i, i + 8) of a BF16 / FP16 operand (16 bytes).
// ko: in a 4-bit kernel's k order (w4_kperm.cuh).
__device__ __forceinline__ void store8_operand16(void* p, Operand op, int64_t i, const float (&v)[8],
                                                 KOrder ko = KOrder::NATURAL) {
  store_packed8_korder(p, i, pack8_operand16(op, v), ko);
}
// Stores 8 values at elements [i, i + 8) of an F32 / BF16 / F16 array (16-byte aligned), rounded
// to d (exact for values already of that dtype): the inverse of load8_as_float.
__device__ __forceinline__ void store8_from_float(void* p, DType d, int64_t i, const float (&v)[8]) {
  if (d == DType::F32) {
    float4* q = reinterpret_cast<float4*>(static_cast<float*>(p) + i);
    q[0] = make_float4(v[0], v[1], v[2], v[3]);
    q[1] = make_float4(v[4], v[5], v[6], v[7]);
    return;
  }
  store8_operand16(p, d == DType::BF16 ? Operand::BF16 : Operand::FP16, i, v);
}

// Packs 4 e4m3 codes (little-endian: code 0 in the low byte).
__device__ __forceinline__ uint32_t pack4_e4m3(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return static_cast<uint32_t>(a) | (static_cast<uint32_t>(b) << 8) | (static_cast<uint32_t>(c) << 16) |
         (static_cast<uint32_t>(d) << 24);
}

// ---- the 4-bit formats' operand values (w4_gemm.hpp) ----

__device__ __forceinline__ float e4m3_value(uint8_t code) {
  const __half_raw hr = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3);
  return __half2float(__half(hr));
}

// A per-row (ROW) e4m3 code stored in the GEMM operand: the byte for fp8 operands, its exact
// value for the 16-bit operands of the 4-bit formats.
__device__ __forceinline__ void store_row_code(void* p, Operand op, int64_t i, uint8_t code,
                                               KOrder ko = KOrder::NATURAL) {
  if (op == Operand::FP8) static_cast<uint8_t*>(p)[i] = code;
  else store_operand(p, op, i, e4m3_value(code), ko);
}

// Per-token fp8 codes of 8 values (quant_row's, by one reciprocal: quant_tensor_rcp) as the operand stores them:
// e4m3 codes (8 bytes, in .x .y) or, for a 16-bit operand, the codes' values (16 bytes).
__device__ __forceinline__ uint4 pack8_row_codes(Operand op, const float (&v)[8], float s) {
  uint8_t q[8];
  const float inv_s = __frcp_rn(s);
#pragma unroll
  for (int j = 0; j < 8; ++j) q[j] = quant_tensor_rcp(v[j], s, inv_s);
  if (op == Operand::FP8) return make_uint4(pack4_e4m3(q[0], q[1], q[2], q[3]), pack4_e4m3(q[4], q[5], q[6], q[7]), 0u, 0u);
  float c[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) c[j] = e4m3_value(q[j]);
  return pack8_operand16(op, c);
}
// Stores what pack8_row_codes / pack8_operand16 packed at element i (8 bytes for FP8, else 16;
// ko: a 16-bit operand in a 4-bit kernel's k order).
__device__ __forceinline__ void store_packed8(void* p, Operand op, int64_t i, uint4 w, KOrder ko = KOrder::NATURAL) {
  if (op == Operand::FP8) *reinterpret_cast<uint2*>(static_cast<uint8_t*>(p) + i) = make_uint2(w.x, w.y);
  else store_packed8_korder(p, i, w, ko);
}
// ROW quantisation of 8 values at elements [i, i + 8) of a row-quantised operand with scale s:
// 8 e4m3 codes (fp8 operand, 8-byte store) or their exact values (bf16 / fp16 operand of the
// 4-bit formats, 16-byte store), each as store_row_code(quant_row(v, s)).
__device__ __forceinline__ void store8_row_codes(void* p, Operand op, int64_t i, const float (&v)[8], float s,
                                                 KOrder ko = KOrder::NATURAL) {
  store_packed8(p, op, i, pack8_row_codes(op, v, s), ko);
}

// e2m1 RNE code of x as the CPU's float_to_e2m1 (the count of decision points at or below |x|;
// NaN -> +6) and the value of a code.
__device__ __forceinline__ uint32_t to_e2m1(float x) {
  const uint32_t u = __float_as_uint(x), a = u & 0x7fffffffu;
  const uint32_t code = (a > 0x3e800000u) + (a >= 0x3f400000u) + (a > 0x3fa00000u) + (a >= 0x3fe00000u) +
                        (a > 0x40200000u) + (a >= 0x40600000u) + (a > 0x40a00000u);
  const uint32_t sign = (a > 0x7f800000u) ? 0u : ((u >> 28) & 0x8u);
  return sign | code;
}
// The value is built from the code's bits, not read from a table: a dynamically indexed local
// array went to local memory (a 32-byte stack frame in gather_nvfp4_vec_kernel, one local load per
// quantised value). Magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6: code 1 is 0.5; a code with exponent
// bits e >= 1 and mantissa bit m is 2^(e - 1) x (1 + m / 2), float exponent field 126 + e.
__device__ __forceinline__ float e2m1_value(uint32_t code) {
  const uint32_t e = (code >> 1) & 3u, m = code & 1u;
  const uint32_t mag = e ? ((126u + e) << 23) | (m << 22) : (m ? 0x3f000000u : 0u);
  return __uint_as_float(mag | ((code & 8u) << 28));
}

// nvfp4 activation quantisation of one 16-wide block, as the CPU's quantize_nvfp4 with global
// scale gs: v in, the dequantised-without-gs values e2m1 * sf out (exact in bf16).
// kCompact: the per-value loop rolled (v then lives in local memory), for the activation kernel:
// unrolled, its body (~2000 instructions per 16-block with the gated activation) made the kernel
// wait on instruction fetch at few rows (each warp walks the code once, cold; ncu, H100, Qwen3-30B-A3B
// at one token: 20 us, half the stall cycles "no instruction"), and it was slower at every size
// (bench/results/2026-11-22-h100-nvfp4-compact-activation). The gather keeps the unrolled form
// (rolled, it was slower from 256 tokens on and no faster below).
// A 16-block's e4m3 scale from its amax m, and a value's e2m1 code times that scale (the two steps of each form below).
// The value's step takes y = nvfp4r::recip(sf), one per block: the quotient v * gs / sf without a division per value
// (nvfp4_round.cuh; the same bits as e2m1_value(to_e2m1(__fdiv_rn(v * gs, sf))) * sf, tests/gpu/test_e2m1_device_gpu.cu).
__device__ __forceinline__ float nvfp4_block_scale(float m, float gs) { return e4m3_value(to_e4m3(__fdiv_rn(gs * m, 6.0f))); }
__device__ __forceinline__ float nvfp4_scaled_value(float v, float gs, float sf, float y) {
  return sf == 0.0f ? 0.0f : nvfp4r::e2m1_times_scale(v * gs, sf, y);
}
template <bool kCompact = false>
__device__ __forceinline__ void nvfp4_block_values(float (&v)[16], float gs) {
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) m = fmaxf(m, abs_for_amax(v[i]));
  const float sf = nvfp4_block_scale(m, gs);
  if (sf == 0.0f) {  // one branch per block (nvfp4_scaled_value's test per value compiled to a branch per value)
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = 0.0f;
    return;
  }
  const float y = nvfp4r::recip(sf);
#pragma unroll(kCompact ? 1 : 16)
  for (int i = 0; i < 16; ++i) v[i] = nvfp4r::e2m1_times_scale(v[i] * gs, sf, y);
}
// The same with a 16-block spread over 16 lanes (lanes 0..15 or 16..31 of a warp), one value each: the block's amax by
// shuffles within the half-warp (abs_for_amax maps NaN to 0, fmaxf is exact and order-free: nvfp4_block_values' max).
// Every lane of the warp calls it; a lane outside the row passes v = 0.
__device__ __forceinline__ float nvfp4_lane_value(float v, float gs) {
  float m = abs_for_amax(v);
#pragma unroll
  for (int o = 8; o >= 1; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  const float sf = nvfp4_block_scale(m, gs);
  return nvfp4_scaled_value(v, gs, sf, nvfp4r::recip(sf));
}

// nvfp4 (W4A4) quantisation of one operand row by 16-wide blocks with 16-byte accesses (cols a
// multiple of 16, a 16-bit operand): load(c, v) fills v with columns c .. c + 7; the block's
// threads take 16-wide blocks in turn. Same values as quantise_nvfp4_row. kCompact: rolled loops
// (nvfp4_block_values), the same operations in the same order.
template <bool kCompact = false, class Load8>
__device__ __forceinline__ void quantise_nvfp4_row_vec(void* out, Operand op, int64_t base, int64_t cols, float gs,
                                                       Load8 load, KOrder ko = KOrder::NATURAL) {
  for (int64_t b = threadIdx.x; b < cols / 16; b += blockDim.x) {
    float v[16];
#pragma unroll(kCompact ? 1 : 2)
    for (int h = 0; h < 2; ++h) {  // the block's two halves of 8 columns
      float x[8];
      load(b * 16 + 8 * h, x);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[8 * h + j] = x[j];
    }
    nvfp4_block_values<kCompact>(v, gs);
#pragma unroll(kCompact ? 1 : 2)
    for (int h = 0; h < 2; ++h) {
      float x[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) x[j] = v[8 * h + j];
      store8_operand16(out, op, base + b * 16 + 8 * h, x, ko);
    }
  }
}

// nvfp4 (W4A4) quantisation of one operand row of `cols` values, one thread per 16-wide block
// (block-strided): value(c) gives the row's value at column c, out + base the row in the operand.
template <class Value>
__device__ __forceinline__ void quantise_nvfp4_row(void* out, Operand op, int64_t base, int64_t cols, float gs,
                                                   Value value, KOrder ko = KOrder::NATURAL) {
  for (int64_t b = threadIdx.x; b < cols / 16; b += blockDim.x) {
    float v[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) v[j] = value(b * 16 + j);
    nvfp4_block_values(v, gs);
#pragma unroll
    for (int j = 0; j < 16; ++j) store_operand(out, op, base + b * 16 + j, v[j], ko);
  }
}

// The GENERIC dequant factor of expert e with the row's activation scale a_row (1 where the
// format has none; x 1 is exact, so the product is generic_factor's). For kernels that compute
// the row scale themselves (the one-token kernels).
__device__ __forceinline__ float generic_factor_with_row(const Dequant& dq, float a_row, int64_t e) {
  float f = 1.0f;
  f *= a_row;
  if (dq.a_expert) f *= dq.a_expert[e];
  if (dq.w_expert) f *= dq.w_expert[e];
  return f;
}
// The GENERIC dequant factor of row r (expert e).
__device__ __forceinline__ float generic_factor(const Dequant& dq, int64_t r, int64_t e) {
  return generic_factor_with_row(dq, dq.a_row ? dq.a_row[r] : 1.0f, e);
}

}  // namespace fusedmoe::cuda
