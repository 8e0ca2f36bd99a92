// GEMM1 and the activation in one kernel for decode-sized calls (the small-M path), for gated
// activations whose output is converted (bf16 / fp16) or quantised with a static per-tensor fp8
// scale: a2[r, n] = quant(round(act(fix(a1[r] . W1[e][gate(n)]), fix(a1[r] . W1[e][up(n)])))).
//
// The unfused pair writes h [rows, 2N] in fp32 and reads it back in the activation kernel. Here
// each group of L lanes streams the gate and the up weight row of one activation output n (as
// small_m_gemm_kernel streams two weight rows: the same lane layout and summation order,
// small_m_dot.cuh), so both sums end in the group's lanes and the activation is applied there
// (activation_math.cuh). Same bits as small-M GEMM1 + the activation kernel; one kernel, no h.
// Blocks over (output blocks, active experts) as small_m_gemm_kernel; up to 8 rows per expert
// share each pass over the weights.
//
// Two kernels: small_m_activation_kernel (fp32 FMAs, the same bits as the unfused pair) and
// small_m_activation_mma_kernel (tensor cores, small_m_mma.cuh: the MMA's rows g / g + 8 are the
// gate / up rows of output g of the block, so one lane ends with both sums of its output for two
// activation rows; the block's warps split k and their sums are added in warp order).
#include <cuda_runtime.h>

#include <string>

#include "cuda/activation_math.cuh"
#include "cuda/activation_store.cuh"
#include "cuda/active_expert.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.hpp"
#include "cuda/device_utils.cuh"
#include "cuda/grouped_gemm.hpp"
#include "cuda/small_m_activation.hpp"
#include "cuda/small_m_dot.cuh"
#include "cuda/small_m_mma.cuh"

namespace fusedmoe::cuda {
namespace {

using namespace small_m;
constexpr int kRowBatch = 8;

// a: [rows, k] GEMM1 operand; b: [E, R, k] weights; p: the activation of GEMM1's output.
template <Operand OP, int L>
__global__ void __launch_bounds__(kWarps * 32) small_m_activation_kernel(const uint8_t* __restrict__ a,
                                                                         const uint8_t* __restrict__ b, int64_t k,
                                                                         int groups,
                                                                         const int32_t* __restrict__ offsets,
                                                                         ActivationParams p) {
  chain_wait();
  using C = Chunk<OP>;
  constexpr int kBytes = OP == Operand::FP8 ? 1 : 2;
  static_assert(kWarpRows == 2, "a lane group streams the gate row and the up row");
  const int e = active_expert<kWarps>(offsets, groups, blockIdx.y);
  if (e < 0) return;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sl = lane % L;
  const int64_t nw = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * (32 / L);
  if (nw >= p.N) return;  // whole warps only: the butterfly below needs every lane
  const int64_t n = nw + lane / L;  // this lane group's activation output
  const bool nok = n < p.N;
  int64_t gi = 0, ui = 0;
  if (nok) gate_up_columns(p, n, gi, ui);
  const int64_t row0 = offsets[e], rows = offsets[e + 1] - row0;
  const int64_t chunks = k / C::kElems;
  const uint8_t* brow[kWarpRows] = {b + (static_cast<int64_t>(e) * p.R + gi) * k * kBytes,
                                    b + (static_cast<int64_t>(e) * p.R + ui) * k * kBytes};
  const bool ok[kWarpRows] = {nok, nok};
  const ActivationRowStore store = ActivationRowStore::make(p, e);

  for (int64_t r0 = 0; r0 < rows; r0 += kRowBatch) {
    const int nr = static_cast<int>(rows - r0 < kRowBatch ? rows - r0 : kRowBatch);
    const uint8_t* ar = a + (row0 + r0) * k * kBytes;
    float acc[kWarpRows][kRowBatch];
#pragma unroll
    for (int i = 0; i < kWarpRows; ++i)
#pragma unroll
      for (int j = 0; j < kRowBatch; ++j) acc[i][j] = 0.0f;
    for (int64_t c0 = sl; c0 < chunks; c0 += L * kUnroll) {
      uint4 w[kUnroll][kWarpRows];
      load_pass<L>(w, brow, ok, c0, chunks);
      fma_pass<OP, L>(acc, w, ar, k * kBytes, nr, c0, chunks);
    }
#pragma unroll
    for (int j = 0; j < kRowBatch; ++j) {
      if (j >= nr) break;
      float h[kWarpRows];
#pragma unroll
      for (int i = 0; i < kWarpRows; ++i) {
        h[i] = group_sum<L>(acc[i][j]);
      }
      if (sl == 0 && nok) store.store_cols(p, row0 + r0 + j, e, n, gi, ui, h[0], h[1]);
    }
  }
}

constexpr int kMmaOuts = 8;    // activation outputs per block (MMA rows: 8 gate + 8 up)
constexpr int kMmaUnroll = 4;  // k-blocks per lane in flight (3 x 16-byte loads each)

// KS warps per block split the k-blocks of the block's 16 weight rows (interleaved runs, below).
template <Operand OP, int KS>
__global__ void __launch_bounds__(KS * 32) small_m_activation_mma_kernel(const uint8_t* __restrict__ a,
                                                                         const uint8_t* __restrict__ b, int64_t k,
                                                                         int groups,
                                                                         const int32_t* __restrict__ offsets,
                                                                         ActivationParams p) {
  chain_wait();
  constexpr int kBytes = OP == Operand::FP8 ? 1 : 2;
  __shared__ float part[KS][4][32];  // each warp's C fragment, for the fixed-order sum over warps
  const int e = active_expert<KS>(offsets, groups, blockIdx.y);
  if (e < 0) return;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kMmaOuts + g;  // this lane's output (rows g, g + 8)
  const bool nok = n < p.N;
  int64_t gi = 0, ui = 0;
  if (nok) gate_up_columns(p, n, gi, ui);
  const int64_t row_bytes = k * kBytes;  // a multiple of 16 (small_m_gemm_applies)
  const int64_t kblocks = (row_bytes + kKBlockBytes - 1) / kKBlockBytes;
  const uint8_t* wg = b + (static_cast<int64_t>(e) * p.R + gi) * row_bytes + 16 * t;
  const uint8_t* wu = b + (static_cast<int64_t>(e) * p.R + ui) * row_bytes + 16 * t;
  const int64_t row0 = offsets[e], rows = offsets[e + 1] - row0;
  const ActivationRowStore store = ActivationRowStore::make(p, e);

  for (int64_t tok0 = 0; tok0 < rows; tok0 += 8) {
    const bool xok = tok0 + g < rows;
    const uint8_t* xr = a + (row0 + (xok ? tok0 + g : 0)) * row_bytes + 16 * t;
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    // Warp w takes the runs of kMmaUnroll k-blocks w, w + KS, ...: the block's warps, running
    // side by side, read KS * 256 contiguous bytes of each of its 16 rows at a time (contiguous
    // ranges per warp, 256-byte pieces of 16 rows far apart, were 24-46% slower for bf16).
    for (int64_t kb = static_cast<int64_t>(warp) * kMmaUnroll; kb < kblocks; kb += KS * kMmaUnroll) {
      uint4 wl[kMmaUnroll], wh[kMmaUnroll], xv[kMmaUnroll];
#pragma unroll
      for (int u = 0; u < kMmaUnroll; ++u) {
        const int64_t off = (kb + u) * kKBlockBytes;
        const bool in = off + 16 * t < row_bytes;
        wl[u] = load16_stream(wg + off, in && nok);
        wh[u] = load16_stream(wu + off, in && nok);
        xv[u] = load16_or_zero(xr + off, in && xok);
      }
#pragma unroll
      for (int u = 0; u < kMmaUnroll; ++u)
        if (kb + u < kblocks) mma_kblock<OP>(c, wl[u], wh[u], xv[u]);
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) part[warp][q][lane] = c[q];
    __syncthreads();
    if (warp == 0) {
      float h[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        h[q] = part[0][q][lane];
#pragma unroll
        for (int w = 1; w < KS; ++w) h[q] += part[w][q][lane];
      }
      // C fragment: h[j] = gate sum, h[2 + j] = up sum of output n for activation row tok0 + 2t + j.
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int64_t tok = tok0 + 2 * t + j;
        if (nok && tok < rows) store.store_cols(p, row0 + tok, e, n, gi, ui, h[j], h[2 + j]);
      }
    }
    __syncthreads();  // part is rewritten by the next row batch
  }
}

template <Operand OP>
void launch_mma(const GroupedGemmArgs& g, const ActivationParams& p, cudaStream_t stream) {
  const unsigned active = static_cast<unsigned>(active_groups(g));
  const int64_t blocks = (p.N + kMmaOuts - 1) / kMmaOuts;
  const dim3 grid(static_cast<unsigned>(blocks), active);
  const auto* a = static_cast<const uint8_t*>(g.a);
  const auto* b = static_cast<const uint8_t*>(g.b);
  // Few blocks (Qwen3: 96 per expert, DeepSeek-V3 TP8: 32): 8 warps split k, so that enough
  // loads are in flight; otherwise 4.
  if (blocks * active < 2048)
    launch_chained(small_m_activation_mma_kernel<OP, 8>, grid, dim3(8 * 32), 0, stream, a, b, g.k, g.groups,
                   g.expert_offsets, p);
  else
    launch_chained(small_m_activation_mma_kernel<OP, 4>, grid, dim3(4 * 32), 0, stream, a, b, g.k, g.groups,
                   g.expert_offsets, p);
}

template <Operand OP>
void launch_op(const GroupedGemmArgs& g, const ActivationParams& p, cudaStream_t stream) {
  const int64_t elem = OP == Operand::FP8 ? 1 : 2;
  const int L = lanes_per_row(g.k * elem / 16);
  const int64_t per_block = static_cast<int64_t>(kWarps) * (32 / L);
  const unsigned active = static_cast<unsigned>(active_groups(g));
  const dim3 grid(static_cast<unsigned>((p.N + per_block - 1) / per_block), active), block(kWarps * 32);
  const auto* a = static_cast<const uint8_t*>(g.a);
  const auto* b = static_cast<const uint8_t*>(g.b);
  with_lanes(L, [&](auto l) {
    launch_chained(small_m_activation_kernel<OP, decltype(l)::value>, grid, block, 0, stream, a, b, g.k, g.groups,
                   g.expert_offsets, p);
  });
}

}  // namespace

bool small_m_activation_applies(const GroupedGemmArgs& g1, const ActivationParams& p) {
  const bool quant_ok = p.quant == Fp8Quant::NONE ? (p.op == Operand::BF16 || p.op == Operand::FP16)
                                                  : (p.quant == Fp8Quant::TENSOR_STATIC && p.op == Operand::FP8);
  return small_m_gemm_applies(g1) && g1.op == p.op && quant_ok && p.act != Activation::RELU2 && p.R == 2 * p.N &&
         g1.n == p.R && (p.dq.kind == Dequant::NONE || p.dq.kind == Dequant::TENSOR);
}

void small_m_gemm1_activation(const GroupedGemmArgs& g1, const ActivationParams& p, cudaStream_t stream,
                              SmallMActivationKernel kernel) {
  if (!small_m_activation_applies(g1, p))
    throw Error("small-M GEMM1 + activation: the call is not one small_m_activation_applies() accepts (k = " +
                std::to_string(g1.k) + ", rows " + std::to_string(g1.max_rows) + ")");
  const bool mma = kernel == SmallMActivationKernel::MMA ||
                   (kernel == SmallMActivationKernel::AUTO && g1.op == Operand::FP8 && p.N <= kSmallMMmaMaxN);
  switch (g1.op) {
    case Operand::BF16: mma ? launch_mma<Operand::BF16>(g1, p, stream) : launch_op<Operand::BF16>(g1, p, stream); break;
    case Operand::FP16: mma ? launch_mma<Operand::FP16>(g1, p, stream) : launch_op<Operand::FP16>(g1, p, stream); break;
    default: mma ? launch_mma<Operand::FP8>(g1, p, stream) : launch_op<Operand::FP8>(g1, p, stream); break;
  }
}

}  // namespace fusedmoe::cuda
