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
#include <cuda_runtime.h>

#include <string>

#include "cuda/activation_math.cuh"
#include "cuda/active_expert.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.hpp"
#include "cuda/device_utils.cuh"
#include "cuda/grouped_gemm.hpp"
#include "cuda/small_m_activation.hpp"
#include "cuda/small_m_dot.cuh"
#include "cuda/small_m_ring.cuh"

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
  const float a_tensor = p.dq.kind == Dequant::TENSOR ? tensor_scale_value(p.dq.a_tensor) : 1.0f;
  const bool fp8 = p.quant == Fp8Quant::TENSOR_STATIC;
  const float s = fp8 ? tensor_scale_value(p.scale) : 1.0f;

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
      if (sl == 0 && nok) {
        const int64_t r = row0 + r0 + j;
        const float ds = row_factor(p, r, e, a_tensor);
        const float v = round_to(p.act_dtype, gated(p, fix_h(p, h[0], ds, r, e, gi), fix_h(p, h[1], ds, r, e, ui)));
        if (fp8) static_cast<uint8_t*>(p.out)[r * p.N + n] = quant_tensor(v, s);
        else store_from_float(p.out, p.op == Operand::BF16 ? DType::BF16 : DType::F16, r * p.N + n, v);
      }
    }
  }
}

// The persistent variant (small_m_ring.cuh): a grid of a few blocks per SM; warp-items are (expert
// with rows, row batch of kRowBatch, lane groups' outputs) in that order, warp w of the grid takes
// items w, w + warps, ...; its passes over the weights run S - 1 ahead through its shared-memory
// ring. Per item the same lane layout, passes (fma_pass) and epilogue as the kernel above, so the
// same bits.
constexpr int kMaxActive = static_cast<int>(kSmallMMaxRows);

template <Operand OP, int L, int S>
__global__ void __launch_bounds__(kWarps * 32) small_m_activation_ring_kernel(const uint8_t* __restrict__ a,
                                                                              const uint8_t* __restrict__ b,
                                                                              int64_t k, int groups,
                                                                              const int32_t* __restrict__ offsets,
                                                                              ActivationParams p) {
  chain_wait();
  using C = Chunk<OP>;
  constexpr int kBytes = OP == Operand::FP8 ? 1 : 2;
  constexpr int kOutsPerWarp = 32 / L;  // one output (gate row + up row) per lane group
  static_assert(kWarpRows == 2, "a lane group streams the gate row and the up row");
  extern __shared__ uint4 ring[];
  __shared__ int act_e[kMaxActive];
  __shared__ int64_t act_row0[kMaxActive], act_first[kMaxActive + 1];  // first warp-item per expert

  const int64_t outs = (p.N + kOutsPerWarp - 1) / kOutsPerWarp;  // warp-items per row batch
  const int na = active_expert_list<kWarps, kMaxActive>(offsets, groups, act_e);
  if (threadIdx.x == 0) {
    int64_t t = 0;
    for (int x = 0; x < na; ++x) {
      const int64_t r0 = offsets[act_e[x]], rows = offsets[act_e[x] + 1] - r0;
      act_row0[x] = r0;
      act_first[x] = t;
      t += (rows + kRowBatch - 1) / kRowBatch * outs;
    }
    act_first[na] = t;
  }
  __syncthreads();

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sl = lane % L;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kWarps;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  const int64_t total = act_first[na];
  if (first >= total) return;
  const int64_t chunks = k / C::kElems;
  const int passes = static_cast<int>((chunks + L * kUnroll - 1) / (L * kUnroll));
  const int64_t nq = (total - first + stride - 1) / stride * passes;  // this warp's passes
  uint4* const my = ring + warp * S * kStageChunks;

  // One warp-item: its expert, rows and this lane group's output n with its gate / up rows.
  struct Item {
    int e;
    int64_t r0;  // first row of the batch
    int nr;
    int64_t n, gi, ui;
    bool ok;
  };
  auto decode = [&](int64_t t, Item& it) {
    int x = 0;
    while (x + 1 < na && act_first[x + 1] <= t) ++x;
    const int64_t rel = t - act_first[x], batch = rel / outs;
    const int e = act_e[x];
    const int64_t rows = offsets[e + 1] - act_row0[x];
    it.e = e;
    it.r0 = act_row0[x] + batch * kRowBatch;
    it.nr = static_cast<int>(rows - batch * kRowBatch < kRowBatch ? rows - batch * kRowBatch : kRowBatch);
    it.n = (rel % outs) * kOutsPerWarp + lane / L;
    it.ok = it.n < p.N;
    it.gi = it.ui = 0;
    if (it.ok) gate_up_columns(p, it.n, it.gi, it.ui);
  };

  // Producer: the next pass to copy and the rows of its item.
  int64_t pq = 0, p_item = first;
  int p_pass = 0;
  const uint8_t* prow[kWarpRows] = {b, b};
  bool pok[kWarpRows] = {false, false};
  auto issue_next = [&]() {
    if (pq < nq) {
      if (p_pass == 0) {
        Item it;
        decode(p_item, it);
        prow[0] = b + (static_cast<int64_t>(it.e) * p.R + it.gi) * k * kBytes;
        prow[1] = b + (static_cast<int64_t>(it.e) * p.R + it.ui) * k * kBytes;
        pok[0] = pok[1] = it.ok;
      }
      issue_pass<L>(my + (pq % S) * kStageChunks, lane, prow, pok, sl + static_cast<int64_t>(p_pass) * L * kUnroll,
                    chunks);
      if (++p_pass == passes) p_pass = 0, p_item += stride;
    }
    cp_async_commit();  // empty groups past the end keep the group count uniform
    ++pq;
  };
#pragma unroll
  for (int s = 0; s < S - 1; ++s) issue_next();

  const float a_tensor = p.dq.kind == Dequant::TENSOR ? tensor_scale_value(p.dq.a_tensor) : 1.0f;
  const bool fp8 = p.quant == Fp8Quant::TENSOR_STATIC;
  const float s_out = fp8 ? tensor_scale_value(p.scale) : 1.0f;
  Item it{};
  int64_t c_item = first;
  int c_pass = 0;
  float acc[kWarpRows][kRowBatch];
  for (int64_t q = 0; q < nq; ++q) {
    issue_next();
    cp_async_wait<S - 1>();  // this lane's copies of pass q are in its slots
    if (c_pass == 0) {
      decode(c_item, it);
#pragma unroll
      for (int i = 0; i < kWarpRows; ++i)
#pragma unroll
        for (int j = 0; j < kRowBatch; ++j) acc[i][j] = 0.0f;
    }
    uint4 w[kUnroll][kWarpRows];
    read_pass(w, my + (q % S) * kStageChunks, lane);
    fma_pass<OP, L>(acc, w, a + it.r0 * k * kBytes, k * kBytes, it.nr, sl + static_cast<int64_t>(c_pass) * L * kUnroll,
                    chunks);
    if (++c_pass < passes) continue;
    c_pass = 0;
    c_item += stride;
#pragma unroll
    for (int j = 0; j < kRowBatch; ++j) {
      if (j >= it.nr) break;
      float h[kWarpRows];
#pragma unroll
      for (int i = 0; i < kWarpRows; ++i) h[i] = group_sum<L>(acc[i][j]);
      if (sl == 0 && it.ok) {
        const int64_t r = it.r0 + j;
        const float ds = row_factor(p, r, it.e, a_tensor);
        const float v =
            round_to(p.act_dtype, gated(p, fix_h(p, h[0], ds, r, it.e, it.gi), fix_h(p, h[1], ds, r, it.e, it.ui)));
        if (fp8) static_cast<uint8_t*>(p.out)[r * p.N + it.n] = quant_tensor(v, s_out);
        else store_from_float(p.out, p.op == Operand::BF16 ? DType::BF16 : DType::F16, r * p.N + it.n, v);
      }
    }
  }
  cp_async_wait<0>();  // nothing in flight when the warp exits (only empty groups remain)
}

template <Operand OP, int S>
void launch_ring(const GroupedGemmArgs& g, const ActivationParams& p, int max_blocks, cudaStream_t stream) {
  const int64_t elem = OP == Operand::FP8 ? 1 : 2;
  const int L = lanes_per_row(g.k * elem / 16);
  const size_t smem = static_cast<size_t>(kWarps) * S * kStageBytes;
  const auto* a = static_cast<const uint8_t*>(g.a);
  const auto* b = static_cast<const uint8_t*>(g.b);
  // Warp-items at most: every active expert's row batches (sum of ceil(rows / kRowBatch) <=
  // active + max_rows / kRowBatch) times the output groups of one batch.
  const int64_t active = g.max_rows < g.groups ? g.max_rows : g.groups;
  const int64_t items = (active + g.max_rows / kRowBatch) * ((p.N + 32 / L - 1) / (32 / L));
  with_lanes(L, [&](auto l) {
    auto* kernel = small_m_activation_ring_kernel<OP, decltype(l)::value, S>;
    int blocks = persistent_blocks(reinterpret_cast<const void*>(kernel), kWarps * 32, smem);
    if (max_blocks > 0 && max_blocks < blocks) blocks = max_blocks;
    const int64_t need = (items + kWarps - 1) / kWarps;
    if (need < blocks) blocks = static_cast<int>(need);
    launch_chained(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kWarps * 32), smem, stream, a, b, g.k, g.groups,
                   g.expert_offsets, p);
  });
}

template <Operand OP>
void launch_op(const GroupedGemmArgs& g, const ActivationParams& p, cudaStream_t stream) {
  const int64_t elem = OP == Operand::FP8 ? 1 : 2;
  const int L = lanes_per_row(g.k * elem / 16);
  const int64_t per_block = static_cast<int64_t>(kWarps) * (32 / L);
  const unsigned active = static_cast<unsigned>(g.max_rows < g.groups ? g.max_rows : g.groups);
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
  if (kernel.ring_stages != 0 && (kernel.ring_stages < 2 || kernel.ring_stages > 4))
    throw Error("small-M GEMM1 + activation: ring_stages must be 0, 2, 3 or 4, got " +
                std::to_string(kernel.ring_stages));
  if (kernel.max_blocks < 0)
    throw Error("small-M GEMM1 + activation: max_blocks must be >= 0, got " + std::to_string(kernel.max_blocks));
  auto per_op = [&](auto op) {
    constexpr Operand OP = decltype(op)::value;
    switch (kernel.ring_stages) {
      case 0: launch_op<OP>(g1, p, stream); break;
      case 2: launch_ring<OP, 2>(g1, p, kernel.max_blocks, stream); break;
      case 3: launch_ring<OP, 3>(g1, p, kernel.max_blocks, stream); break;
      default: launch_ring<OP, 4>(g1, p, kernel.max_blocks, stream); break;
    }
  };
  switch (g1.op) {
    case Operand::BF16: per_op(std::integral_constant<Operand, Operand::BF16>{}); break;
    case Operand::FP16: per_op(std::integral_constant<Operand, Operand::FP16>{}); break;
    default: per_op(std::integral_constant<Operand, Operand::FP8>{}); break;
  }
}

}  // namespace fusedmoe::cuda
