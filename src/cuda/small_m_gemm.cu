// Small-M grouped GEMM (decode and small batches): D[rows of g] = A[rows of g] x B[g]^T for bf16,
// fp16 and fp8 (e4m3) operands, fp32 accumulation, fp32 unscaled D, as the SM90 paths.
//
// With a row or two per expert the GEMMs only stream weights, and the tile GEMMs leave most SMs
// idle when an expert's weights are few tiles (DeepSeek-V3 TP8: 512 rows -> 4 tiles per expert).
// Here each warp owns kWarpRows weight rows and streams them along k with 16-byte loads, several
// loads in flight per lane; every row of the expert (in batches of kRowBatch) is multiplied
// against the same weight registers, so the weights are read from memory once per batch.
// Products are summed in fp32: each lane in k order over its strided chunks, then a fixed
// butterfly over the lanes (deterministic; the e4m3 x e4m3 products are exact in fp32).
// Blocks are laid out over (weight-row blocks, active experts): blockIdx.y = a picks the a-th
// expert with rows, so empty experts cost no blocks.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <string>

#include "cuda/active_expert.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.hpp"
#include "cuda/grouped_gemm.hpp"

namespace fusedmoe::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kWarpRows = 2;   // weight rows (outputs columns) per warp
constexpr int kRowBatch = 8;   // activation rows multiplied per pass over the weights
constexpr int kUnroll = 4;     // 16-byte chunks per lane and weight row in flight

// Elements per 16-byte chunk and their conversion to fp32.
template <Operand OP>
struct Chunk;
template <>
struct Chunk<Operand::BF16> {
  static constexpr int kElems = 8;
  __device__ static void to_float(const uint4& u, float (&f)[kElems]) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      f[2 * j] = __uint_as_float(w[j] << 16);
      f[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
    }
  }
};
template <>
struct Chunk<Operand::FP16> {
  static constexpr int kElems = 8;
  __device__ static void to_float(const uint4& u, float (&f)[kElems]) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 v = __half22float2(*reinterpret_cast<const __half2*>(&w[j]));
      f[2 * j] = v.x;
      f[2 * j + 1] = v.y;
    }
  }
};
template <>
struct Chunk<Operand::FP8> {
  static constexpr int kElems = 16;
  __device__ static void to_float(const uint4& u, float (&f)[kElems]) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const __nv_fp8x2_storage_t pair = static_cast<__nv_fp8x2_storage_t>((w[j] >> (16 * h)) & 0xffffu);
        const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3);
        const float2 v = __half22float2(*reinterpret_cast<const __half2*>(&hr));
        f[4 * j + 2 * h] = v.x;
        f[4 * j + 2 * h + 1] = v.y;
      }
    }
  }
};

template <Operand OP>
__global__ void __launch_bounds__(kWarps * 32) small_m_gemm_kernel(const uint8_t* __restrict__ a,
                                                                   const uint8_t* __restrict__ b, float* __restrict__ d,
                                                                   int64_t n, int64_t k, int groups,
                                                                   const int32_t* __restrict__ offsets) {
  // Before chain_wait() (chained_launch.cuh) this kernel reads only what is final when it starts:
  // the expert offsets, written by the plan kernel at least two chained kernels earlier (so
  // complete before this one could launch; read through L2, ld.global.cg), and the weights. It
  // issues its first pass of weight loads there, so they overlap the previous kernel's tail (at
  // decode sizes that pass is a large part of the expert's rows); the activations and D only
  // after the wait.
  using C = Chunk<OP>;
  constexpr int kBytes = OP == Operand::FP8 ? 1 : 2;
  const int e = active_expert<kWarps>(offsets, groups, blockIdx.y);
  if (e < 0) return;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * kWarpRows;
  if (n0 >= n) return;
  const int64_t row0 = __ldcg(offsets + e), rows = __ldcg(offsets + e + 1) - row0;
  const int64_t chunks = k / C::kElems;  // k * kBytes is a multiple of 16 (TMA shape check)
  const uint8_t* bw = b + (static_cast<int64_t>(e) * n + n0) * k * kBytes;
  bool nok[kWarpRows];
#pragma unroll
  for (int i = 0; i < kWarpRows; ++i) nok[i] = n0 + i < n;
  uint4 w[kUnroll][kWarpRows];
  auto load_weights = [&](int64_t c0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + 32 * u;
#pragma unroll
      for (int i = 0; i < kWarpRows; ++i)
        w[u][i] = (c < chunks && nok[i]) ? __ldg(reinterpret_cast<const uint4*>(bw + (i * k + c * C::kElems) * kBytes))
                                         : make_uint4(0, 0, 0, 0);
    }
  };
  load_weights(lane);  // the first pass of the first row batch
  chain_wait();

  for (int64_t r0 = 0; r0 < rows; r0 += kRowBatch) {
    const int nr = static_cast<int>(rows - r0 < kRowBatch ? rows - r0 : kRowBatch);
    const uint8_t* ar = a + (row0 + r0) * k * kBytes;
    float acc[kWarpRows][kRowBatch];
#pragma unroll
    for (int i = 0; i < kWarpRows; ++i)
#pragma unroll
      for (int j = 0; j < kRowBatch; ++j) acc[i][j] = 0.0f;

    for (int64_t c0 = lane; c0 < chunks; c0 += 32 * kUnroll) {
      if (r0 != 0 || c0 != lane) load_weights(c0);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t c = c0 + 32 * u;
        if (c >= chunks) break;
        float wf[kWarpRows][C::kElems];
#pragma unroll
        for (int i = 0; i < kWarpRows; ++i) C::to_float(w[u][i], wf[i]);
#pragma unroll
        for (int j = 0; j < kRowBatch; ++j) {
          if (j >= nr) break;
          const uint4 av = __ldg(reinterpret_cast<const uint4*>(ar + (j * k + c * C::kElems) * kBytes));
          float af[C::kElems];
          C::to_float(av, af);
#pragma unroll
          for (int i = 0; i < kWarpRows; ++i)
#pragma unroll
            for (int q = 0; q < C::kElems; ++q) acc[i][j] = fmaf(wf[i][q], af[q], acc[i][j]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kWarpRows; ++i)
#pragma unroll
      for (int j = 0; j < kRowBatch; ++j) {
        if (j >= nr) break;
        float v = acc[i][j];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0 && nok[i]) {
          d[(row0 + r0 + j) * n + n0 + i] = v;
        }
      }
  }
}

}  // namespace

bool small_m_gemm_applies(const GroupedGemmArgs& a) {
  if (a.op == Operand::FP32 || a.max_rows <= 0 || a.groups <= 0) return false;
  // Decode-like only: no more rows than experts, and few of them (measured on H200: at 1.25+
  // expected rows per expert the tile GEMMs were faster).
  if (a.max_rows > a.groups || a.max_rows > kSmallMMaxRows) return false;
  const int64_t elem = a.op == Operand::FP8 ? 1 : 2;
  // Short rows (k * elem < kSmallMMinRowBytes) leave each lane one chunk: the tile GEMM wins.
  return (a.k * elem) % 16 == 0 && a.k * elem >= kSmallMMinRowBytes && reinterpret_cast<uintptr_t>(a.a) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(a.b) % 16 == 0;
}

void small_m_grouped_gemm(const GroupedGemmArgs& args, cudaStream_t stream) {
  // The kernel's 16-byte loads: refuse (never read misaligned) what small_m_gemm_applies() rules out.
  const int64_t elem = args.op == Operand::FP8 ? 1 : 2;
  if (args.op == Operand::FP32 || (args.k * elem) % 16 != 0 || reinterpret_cast<uintptr_t>(args.a) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(args.b) % 16 != 0)
    throw Error("small-M grouped GEMM: needs bf16 / fp16 / fp8 operands with rows of a multiple of 16 bytes and "
                "16-byte aligned A and B (k = " + std::to_string(args.k) + ")");
  const int64_t active = args.max_rows < args.groups ? args.max_rows : args.groups;
  const int64_t per_block = static_cast<int64_t>(kWarps) * kWarpRows;
  const dim3 grid(static_cast<unsigned>((args.n + per_block - 1) / per_block), static_cast<unsigned>(active));
  const auto* a = static_cast<const uint8_t*>(args.a);
  const auto* b = static_cast<const uint8_t*>(args.b);
  const dim3 block(kWarps * 32);
  float* d = args.d;
  const int64_t n = args.n, k = args.k;
  const int groups = args.groups;
  const int32_t* off = args.expert_offsets;
  switch (args.op) {
    case Operand::BF16: launch_chained(small_m_gemm_kernel<Operand::BF16>, grid, block, 0, stream,
                                       a, b, d, n, k, groups, off); break;
    case Operand::FP16: launch_chained(small_m_gemm_kernel<Operand::FP16>, grid, block, 0, stream,
                                       a, b, d, n, k, groups, off); break;
    default: launch_chained(small_m_gemm_kernel<Operand::FP8>, grid, block, 0, stream,
                            a, b, d, n, k, groups, off); break;
  }
  FUSEDMOE_CUDA_CHECK_LAUNCH();
}

}  // namespace fusedmoe::cuda
