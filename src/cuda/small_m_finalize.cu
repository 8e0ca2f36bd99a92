// GEMM2 and finalize in one kernel for decode-sized calls (the small-M path): out[t, c] =
// sum over the token's slots k (in order) of w_tk * (dequant(a2[row_k] . W2[e_k][c]) + b2[e_k, c]).
//
// The unfused pair writes y [rows, K] in fp32 with the small-M GEMM and reads it back in the
// finalize kernel; at a row or two per expert both are short and the second launch is a visible
// part of the layer. Here blocks are laid out over (column block, token): the block's warps split
// the token's slots (S warps, slot s on warp s % S) and the column block (kWarps / S groups of
// kWarpRows * 32 / L columns); each warp computes y of its slot for its columns exactly as
// small_m_gemm_kernel does for that row (same lane layout and order, small_m_dot.cuh), leaves it
// in shared memory, and one thread per column then sums the slots in order with finalize's
// add_slot (finalize_term.cuh). Same bits as small-M GEMM2 + finalize, one kernel and no y.
#include <cuda_runtime.h>

#include <string>

#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.hpp"
#include "cuda/device_utils.cuh"
#include "cuda/finalize_term.cuh"
#include "cuda/grouped_gemm.hpp"
#include "cuda/small_m_dot.cuh"
#include "cuda/small_m_finalize.hpp"

namespace fusedmoe::cuda {
namespace {

using namespace small_m;

// a: [rows, k] GEMM2 operand; b: [E, n, k] weights (n = hidden K of the layer, k = N).
// kBlock (fp8-block): blk.a_scale / blk.b_scale as GroupedGemmArgs (the activation scales in the
// BLOCK layout, found through the expert offsets), applied per 128-wide k block (fma_pass).
struct BlockArgs {
  const int32_t* offsets;
  const float* a_scale;
  const float* b_scale;
};
template <Operand OP, int L, int S, bool kBlock>
__global__ void __launch_bounds__(kWarps * 32) small_m_finalize_kernel(const uint8_t* __restrict__ a,
                                                                       const uint8_t* __restrict__ b, int64_t n,
                                                                       int64_t k, FinalizeParams p, BlockArgs blk) {
  chain_wait();
  using C = Chunk<OP>;
  constexpr int kBytes = OP == Operand::FP8 ? 1 : 2;
  constexpr int kGroups = kWarps / S;                  // column groups of the block
  constexpr int kWarpCols = kWarpRows * (32 / L);      // columns of one warp
  constexpr int kBlockCols = kGroups * kWarpCols;
  extern __shared__ float ys[];                         // [topk][kBlockCols]
  __shared__ TokenSlots slots;

  const int64_t t = blockIdx.y;
  const int topk = static_cast<int>(p.topk);
  const float a_tensor = p.dq.kind == Dequant::TENSOR ? tensor_scale_value(p.dq.a_tensor) : 1.0f;
  slots.load(p, t, a_tensor);
  __syncthreads();

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sl = lane % L;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kBlockCols;
  const int jw = (warp / S) * kWarpCols + (lane / L) * kWarpRows;  // first block column of the lane group
  const int64_t n0 = col0 + jw;
  const int64_t chunks = k / C::kElems;
  bool nok[kWarpRows];
#pragma unroll
  for (int i = 0; i < kWarpRows; ++i) nok[i] = n0 + i < n;
  for (int s = warp % S; s < topk; s += S) {
    const int32_t r = slots.row[s];
    if (r < 0) continue;  // the same s on every lane of the warp
    const uint8_t* bw = b + (static_cast<int64_t>(slots.expert[s]) * n + n0) * k * kBytes;
    const uint8_t* brow[kWarpRows];
#pragma unroll
    for (int i = 0; i < kWarpRows; ++i) brow[i] = bw + i * k * kBytes;
    const uint8_t* ar = a + static_cast<int64_t>(r) * k * kBytes;
    float acc[kWarpRows][1] = {};
    BlockScalesRef sc{};
    if constexpr (kBlock) {
      // Row r of expert e: column r - row0 of the expert's [k / 128, rows_e] activation scales;
      // lane groups past n read the last row block's weight scales (in bounds, unused).
      const int32_t e = slots.expert[s];
      const int64_t row0 = blk.offsets[e], rows_e = blk.offsets[e + 1] - row0, kblocks = k / 128;
      const int64_t nb = (n0 < n ? n0 : n - 1) / 128;
      sc = {blk.a_scale + row0 * kblocks + (r - row0), rows_e, blk.b_scale + (e * (n / 128) + nb) * kblocks};
    }
    for (int64_t c0 = sl; c0 < chunks; c0 += L * kUnroll) {
      uint4 w[kUnroll][kWarpRows];
      load_pass<L>(w, brow, nok, c0, chunks);
      fma_pass<OP, L, kBlock>(acc, w, ar, 0, 1, c0, chunks, &sc);
    }
#pragma unroll
    for (int i = 0; i < kWarpRows; ++i) {
      const float v = group_sum<L>(acc[i][0]);
      if (sl == 0) ys[s * kBlockCols + jw + i] = v;
    }
  }
  __syncthreads();

  for (int j = threadIdx.x; j < kBlockCols; j += blockDim.x) {
    const int64_t c = col0 + j;
    if (c >= n) break;
    float out = 0.0f;
    for (int s = 0; s < topk; ++s) {
      if (slots.row[s] < 0) continue;
      out = add_slot(p, out, ys[s * kBlockCols + j], slots.weight[s], slots.factor[s], slots.expert[s], c);
    }
    store_from_float(p.out, p.out_dtype, t * n + c, out);
  }
}

// Slot warps: the largest power of two <= min(topk, kWarps); the rest of the block's warps take
// more columns.
int slot_warps(int64_t topk) {
  int s = 1;
  while (s * 2 <= kWarps && s * 2 <= topk) s *= 2;
  return s;
}

template <Operand OP, int L, int S, bool kBlock>
void launch_fused(const GroupedGemmArgs& g, const FinalizeParams& p, cudaStream_t stream) {
  constexpr int kBlockCols = (kWarps / S) * kWarpRows * (32 / L);
  // topk * kBlockCols floats: at most 8 KB (S = 8: 64 slots x 16 columns; fewer slots, more columns)
  const size_t smem = static_cast<size_t>(p.topk) * kBlockCols * sizeof(float);
  const dim3 grid(static_cast<unsigned>((g.n + kBlockCols - 1) / kBlockCols), static_cast<unsigned>(p.M));
  const BlockArgs blk{g.expert_offsets, g.a_scale, g.b_scale};
  launch_chained(small_m_finalize_kernel<OP, L, S, kBlock>, grid, dim3(kWarps * 32), smem, stream,
                 static_cast<const uint8_t*>(g.a), static_cast<const uint8_t*>(g.b), g.n, g.k, p, blk);
}

template <Operand OP, int L, bool kBlock>
void launch_s(const GroupedGemmArgs& g, const FinalizeParams& p, cudaStream_t stream) {
  switch (slot_warps(p.topk)) {
    case 1: launch_fused<OP, L, 1, kBlock>(g, p, stream); break;
    case 2: launch_fused<OP, L, 2, kBlock>(g, p, stream); break;
    case 4: launch_fused<OP, L, 4, kBlock>(g, p, stream); break;
    default: launch_fused<OP, L, 8, kBlock>(g, p, stream); break;
  }
}

template <Operand OP, bool kBlock = false>
void launch_l(const GroupedGemmArgs& g, const FinalizeParams& p, cudaStream_t stream) {
  const int64_t elem = OP == Operand::FP8 ? 1 : 2;
  with_lanes(lanes_per_row(g.k * elem / 16),
             [&](auto l) { launch_s<OP, decltype(l)::value, kBlock>(g, p, stream); });
}

}  // namespace

bool small_m_finalize_applies(const GroupedGemmArgs& g2, const FinalizeParams& p) {
  // Where GEMM2 would take the small-M path and the finalize is a plain top-k sum of fp32 y.
  // (Whether it pays is small_m_fusion_pays(), the caller's choice.)
  return small_m_gemm_applies(g2) && p.M >= 1 && p.M <= 65535 && p.topk >= 1 && p.topk <= kMaxTokenSlots &&
         p.K == g2.n && p.dq.kind != Dequant::GENERIC;
}

void small_m_gemm2_finalize(const GroupedGemmArgs& g2, const FinalizeParams& p, cudaStream_t stream,
                            bool block_scaled) {
  if (!small_m_finalize_applies(g2, p) || (block_scaled && !small_m_block_scales_ok(g2)))
    throw Error("small-M GEMM2 + finalize: the call is not one small_m_finalize_applies() accepts (k = " +
                std::to_string(g2.k) + ", rows " + std::to_string(g2.max_rows) + ", topk " + std::to_string(p.topk) +
                (block_scaled ? ", fp8-block: n and k multiples of 128 and both scale arrays" : "") + ")");
  switch (g2.op) {
    case Operand::BF16: launch_l<Operand::BF16>(g2, p, stream); break;
    case Operand::FP16: launch_l<Operand::FP16>(g2, p, stream); break;
    default:
      if (block_scaled) launch_l<Operand::FP8, true>(g2, p, stream);
      else launch_l<Operand::FP8>(g2, p, stream);
      break;
  }
}

}  // namespace fusedmoe::cuda
