// Small-M grouped GEMM (decode and small batches): D[rows of g] = A[rows of g] x B[g]^T for bf16,
// fp16 and fp8 (e4m3) operands, fp32 accumulation, fp32 unscaled D, as the SM90 paths.
//
// With a row or two per expert the GEMMs only stream weights, and the tile GEMMs leave most SMs
// idle when an expert's weights are few tiles (DeepSeek-V3 TP8: 512 rows -> 4 tiles per expert).
// Here each group of L lanes owns kWarpRows weight rows and streams them along k with 16-byte
// loads, several loads in flight per lane; every row of the expert (in batches of kRowBatch) is multiplied
// against the same weight registers, so the weights are read from memory once per batch.
// Products are summed in fp32: each lane in k order over its strided chunks, then a fixed
// butterfly over the L lanes (deterministic; the e4m3 x e4m3 products are exact in fp32).
// L (lanes per row) is 32 for long rows; short rows take the smallest L whose first pass covers
// the row (L * kUnroll chunks), so a warp holds 32 / L row groups and its loads in flight do not
// shrink with the row (rows of 768 B at L = 32 left 5 of 8 load slots per lane empty; at 256 B
// all but one, and lost to the tile GEMM).
// Blocks are laid out over (weight-row blocks, active experts): blockIdx.y = a picks the a-th
// expert with rows, so empty experts cost no blocks.
#include <cuda_runtime.h>

#include <string>

#include "cuda/active_expert.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.hpp"
#include "cuda/grouped_gemm.hpp"
#include "cuda/small_m_dot.cuh"

namespace fusedmoe::cuda {
namespace {

using namespace small_m;
constexpr int kRowBatch = 8;  // activation rows multiplied per pass over the weights

// kBlock (fp8-block, SM90_FP8_BLOCK): a_scale / b_scale as GroupedGemmArgs, each 128-wide k block's
// partial sums scaled (fma_pass), D dequantised; n and k multiples of 128.
template <Operand OP, int L, bool kEarly, bool kBlock>
__global__ void __launch_bounds__(kWarps * 32) small_m_gemm_kernel(const uint8_t* __restrict__ a,
                                                                   const uint8_t* __restrict__ b, float* __restrict__ d,
                                                                   int64_t n, int64_t k, int groups,
                                                                   const int32_t* __restrict__ offsets,
                                                                   const float* __restrict__ a_scale,
                                                                   const float* __restrict__ b_scale) {
  // kEarly (GroupedGemmArgs::offsets_final_at_launch): before chain_wait() (chained_launch.cuh)
  // this kernel reads only what is final when it starts: the expert offsets, written by the plan
  // kernel at least two chained kernels earlier (so complete before this one could launch; read
  // through L2, ld.global.cg), and the weights. Without kEarly (the plan was written by the kernel
  // right before, launch_plan_gather) it waits first and does everything after. With kEarly it
  // issues its first pass of weight loads there, so they overlap the previous kernel's tail (at
  // decode sizes that pass is a large part of the expert's rows); the activations and D only
  // after the wait. Warps without work wait too before they exit: the chain's guarantee (when a
  // kernel starts, the one two places before it has completed) needs every block of every kernel
  // to pass the wait.
  if (!kEarly) chain_wait();
  using C = Chunk<OP>;
  constexpr int kBytes = OP == Operand::FP8 ? 1 : 2;
  const int e = active_expert<kWarps>(offsets, groups, blockIdx.y);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sl = lane % L;
  constexpr int kWarpAllRows = kWarpRows * (32 / L);
  const int64_t nw = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * kWarpAllRows;
  const bool work = e >= 0 && nw < n;  // whole warps only: the butterfly below needs every lane
  const int64_t n0 = nw + (lane / L) * kWarpRows;
  const int64_t row0 = work ? __ldcg(offsets + e) : 0, rows = work ? __ldcg(offsets + e + 1) - row0 : 0;
  const int64_t chunks = k / C::kElems;  // k * kBytes is a multiple of 16 (TMA shape check)
  const uint8_t* bw = b + (static_cast<int64_t>(work ? e : 0) * n + n0) * k * kBytes;
  bool nok[kWarpRows];
  const uint8_t* brow[kWarpRows];
#pragma unroll
  for (int i = 0; i < kWarpRows; ++i) {
    nok[i] = n0 + i < n;
    brow[i] = bw + i * k * kBytes;
  }
  uint4 w[kUnroll][kWarpRows];
  auto load_weights = [&](int64_t c0) { load_pass<L>(w, brow, nok, c0, chunks); };
  if (work) load_weights(sl);  // the first pass of the first row batch
  if (kEarly) chain_wait();
  if (!work) return;

  for (int64_t r0 = 0; r0 < rows; r0 += kRowBatch) {
    const int nr = static_cast<int>(rows - r0 < kRowBatch ? rows - r0 : kRowBatch);
    const uint8_t* ar = a + (row0 + r0) * k * kBytes;
    float acc[kWarpRows][kRowBatch];
#pragma unroll
    for (int i = 0; i < kWarpRows; ++i)
#pragma unroll
      for (int j = 0; j < kRowBatch; ++j) acc[i][j] = 0.0f;

    BlockScalesRef sc{};  // kBlock: the scales of this row batch and lane group
    if constexpr (kBlock) {
      // Weight rows past n (nok false) read the last row block's scales: in bounds, unused.
      const int64_t kblocks = k / 128, nb = (n0 < n ? n0 : n - 1) / 128;
      sc = {a_scale + row0 * kblocks + r0, rows, b_scale + (e * (n / 128) + nb) * kblocks};
    }
    for (int64_t c0 = sl; c0 < chunks; c0 += L * kUnroll) {
      if (r0 != 0 || c0 != sl) load_weights(c0);
      fma_pass<OP, L, kBlock>(acc, w, ar, k * kBytes, nr, c0, chunks, &sc);
    }
#pragma unroll
    for (int i = 0; i < kWarpRows; ++i)
#pragma unroll
      for (int j = 0; j < kRowBatch; ++j) {
        if (j >= nr) break;
        const float v = group_sum<L>(acc[i][j]);
        if (sl == 0 && nok[i]) {
          d[(row0 + r0 + j) * n + n0 + i] = v;
        }
      }
  }
}

template <Operand OP, bool kBlock>
void launch_op(const GroupedGemmArgs& g, int L, unsigned active, cudaStream_t stream) {
  const auto* a = static_cast<const uint8_t*>(g.a);
  const auto* b = static_cast<const uint8_t*>(g.b);
  auto* d = static_cast<float*>(g.d);
  const int64_t per_block = static_cast<int64_t>(kWarps) * kWarpRows * (32 / L);
  const dim3 grid(static_cast<unsigned>((g.n + per_block - 1) / per_block), active), block(kWarps * 32);
  with_lanes(L, [&](auto l) {
    constexpr int kL = decltype(l)::value;
    if (g.offsets_final_at_launch)
      launch_chained(small_m_gemm_kernel<OP, kL, true, kBlock>, grid, block, 0, stream, a, b, d, g.n, g.k, g.groups,
                     g.expert_offsets, g.a_scale, g.b_scale);
    else
      launch_chained(small_m_gemm_kernel<OP, kL, false, kBlock>, grid, block, 0, stream, a, b, d, g.n, g.k,
                     g.groups, g.expert_offsets, g.a_scale, g.b_scale);
  });
}

}  // namespace

bool small_m_gemm_applies(const GroupedGemmArgs& a) {
  if (a.op == Operand::FP32 || a.max_rows <= 0 || a.groups <= 0) return false;
  // Decode-like only: no more rows than experts, and few of them (measured on H200: at 1.25+
  // expected rows per expert the tile GEMMs were faster).
  if (a.max_rows > a.groups || a.max_rows > kSmallMMaxRows) return false;
  const int64_t elem = a.op == Operand::FP8 ? 1 : 2;
  return (a.k * elem) % 16 == 0 && a.k * elem >= kSmallMMinRowBytes && reinterpret_cast<uintptr_t>(a.a) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(a.b) % 16 == 0;
}

bool small_m_block_scales_ok(const GroupedGemmArgs& a) {
  return a.op == Operand::FP8 && a.n % 128 == 0 && a.k % 128 == 0 && a.a_scale != nullptr && a.b_scale != nullptr;
}

void small_m_grouped_gemm(const GroupedGemmArgs& args, cudaStream_t stream, bool block_scaled) {
  // The kernel's 16-byte loads: refuse (never read misaligned) what small_m_gemm_applies() rules out.
  const int64_t elem = args.op == Operand::FP8 ? 1 : 2;
  if (args.op == Operand::FP32 || (args.k * elem) % 16 != 0 || reinterpret_cast<uintptr_t>(args.a) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(args.b) % 16 != 0)
    throw Error("small-M grouped GEMM: needs bf16 / fp16 / fp8 operands with rows of a multiple of 16 bytes and "
                "16-byte aligned A and B (k = " + std::to_string(args.k) + ")");
  if (block_scaled && !small_m_block_scales_ok(args))
    throw Error("small-M grouped GEMM (fp8-block): needs fp8 operands, n and k multiples of 128 and both block "
                "scale arrays (n = " + std::to_string(args.n) + ", k = " + std::to_string(args.k) + ")");
  const unsigned active = static_cast<unsigned>(active_groups(args));
  const int L = lanes_per_row(args.k * elem / 16);
  switch (args.op) {
    case Operand::BF16: launch_op<Operand::BF16, false>(args, L, active, stream); break;
    case Operand::FP16: launch_op<Operand::FP16, false>(args, L, active, stream); break;
    default:
      if (block_scaled) launch_op<Operand::FP8, true>(args, L, active, stream);
      else launch_op<Operand::FP8, false>(args, L, active, stream);
      break;
  }
}

}  // namespace fusedmoe::cuda
