#pragma once
// GEMM1 with the activation stage in its epilogue, for large batches on the SM90 grouped GEMM:
// the CTA's fp32 accumulators go straight through the activation stage's arithmetic
// (activation_math.cuh: dequant factor, fc1 bias, gated activation, rounding to bf16 - the
// activation dtype of the layers it takes - static fp8 quantisation) to GEMM2's operand, so GEMM1's fp32 output h is neither written
// nor read back and the activation kernel does not run. At 4096 tokens h is the largest
// intermediate of small-expert layers (Qwen3-30B-A3B: 201 MB of fp32 written and read for a 25 MB
// fp8 operand). Users: bf16 and static fp8-tensor layers (the operand itself), fp8-channel
// (per-channel dequant, bf16 rows for a per-row quantise pass: sm90_grouped_gemm_fp8_act_channel.cu)
// and fp8-block (the blockwise mainloop, bf16 rows for a 1 x 128 quantise pass:
// sm90_grouped_gemm_fp8_blockwise_act.cu).
//
// Pairing: it needs the gate and the up sum of an output in one thread. The wgmma accumulator
// fragment of a 256-column tile gives each thread the columns 8b + 2t, 8b + 2t + 1 of the 32
// 8-column blocks b, values 0 .. 63 in the first 128 columns and values 64 .. 127 the same
// positions 128 columns on. So:
// - gate / up rows interleaved ([g0, u0, g1, u1, ..], LayerConfig::interleaved): values 2j, 2j + 1
//   are a pair;
// - halves ([gate rows; up rows] or the reverse): the mainloop below loads the tile's B as 128 rows
//   of the first half and the same 128 rows of the second half, so value j and value j + 64 are a
//   pair. No weight copy, no extra traffic.
// No data moves between threads either way.
//
// Built on CUTLASS's register-to-global epilogue interface (as its DefaultEpilogueArray, wrapped
// in Sm90TmaWarpSpecializedAdapter): no shared memory, so the mainloop gets the epilogue's stages.
// Stores go straight to global memory (interleaved: one output per store; halves: two adjacent
// outputs): the operand written is 1/8 (fp8) or 1/4 (bf16) of the fp32 h bytes the unfused GEMM1
// wrote through its TMA epilogue.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "cuda/activation_math.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/device_utils.cuh"
#include "cuda/grouped_gemm.hpp"
#include "cuda/moe_kernels.hpp"
#include "cuda/sm90_gather_a_mainloop.cuh"
#include "cuda/sm90_grouped_gemm.cuh"
#include "cuda/sm90_sibling_sync_mainloop.cuh"
#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "cutlass/epilogue/thread/linear_combination.h"

namespace fusedmoe::cuda::sm90 {

// The arithmetic of one gate / up pair, exactly as activation.cu's act8 and act_value: fix_h on
// each sum (dequant factor ds - 1 for NONE, where v * 1 = v - then the fc1 bias of its GEMM1
// column), the gated activation, rounding to bf16. c0 / c1 are the sums of GEMM1 columns col0 /
// col1 (gate first in GATE_UP order). The activation and the bias are template arguments, so a
// tile runs one straight-line instance of ~40-50 instructions per pair (SASS of efc3aea). The first version switched
// on them per pair (19k instructions of epilogue code, 64-bit index math per store) and ran GEMM1
// 1.3-2.7x slower than GEMM1 plus the activation kernel (H100, 2026-11-22).
// bias_e: the expert's fc1 bias row (kBias). ds0 / ds1: the dequant factors of columns col0 / col1
// (equal but for per-channel dequant, where each is a_row[r] x w[e, col], as fix_h).
template <Activation A, bool kBias>
__device__ __forceinline__ __nv_bfloat16 gated_act_value(const ActivationParams& p, float ds0, float ds1,
                                                         const float* bias_e, int col0, int col1, float c0, float c1) {
  const bool gate_first = p.order == GateUpOrder::GATE_UP;
  float g = __fmul_rn(gate_first ? c0 : c1, gate_first ? ds0 : ds1);
  float u = __fmul_rn(gate_first ? c1 : c0, gate_first ? ds1 : ds0);
  if constexpr (kBias) {
    g = __fadd_rn(g, bias_e[gate_first ? col0 : col1]);
    u = __fadd_rn(u, bias_e[gate_first ? col1 : col0]);
  }
  // round_to(BF16): sm90_gemm1_act_applies takes bf16 activations only.
  return __float2bfloat16_rn(gated_as<A>(p, g, u));
}

// A global store under a predicate, in PTX: the value is an operand of the asm whatever the
// predicate, so nvcc cannot sink its computation into a branch around the store. With a C++ `if`
// it did (one branch per output pair), and the activations of successive pairs could not overlap.
__device__ __forceinline__ void st_if(bool pred, void* dst, uint32_t v, int bytes) {
  if (bytes == 1)
    asm volatile("{.reg .pred p; setp.ne.b32 p, %2, 0; @p st.global.b8 [%0], %1;}" ::"l"(dst), "r"(v), "r"(int(pred)) : "memory");
  else if (bytes == 2)
    asm volatile("{.reg .pred p; setp.ne.b32 p, %2, 0; @p st.global.b16 [%0], %1;}" ::"l"(dst), "h"(uint16_t(v)), "r"(int(pred)) : "memory");
  else
    asm volatile("{.reg .pred p; setp.ne.b32 p, %2, 0; @p st.global.b32 [%0], %1;}" ::"l"(dst), "r"(v), "r"(int(pred)) : "memory");
}

// A 4 x 4 transpose across the four lanes of a quad (lane t = threadIdx % 4): b[s] = lane s's a[t].
// In the wgmma accumulator fragment a quad holds one row's 8-column block, two columns per lane;
// with a[k] the packed pair of block k, lane t ends with all 8 outputs of block t: one 16-byte
// (bf16) or 8-byte (fp8) store instead of four 4- / 2-byte ones. Two butterfly stages (lane bit 0,
// then bit 1), each swapping the elements whose index bit differs from the lane bit; every index
// is static (a select on a dynamic index became local memory: a 688-byte stack frame).
__device__ __forceinline__ void quad_transpose4(const uint32_t (&a)[4], uint32_t (&b)[4], int t) {
#pragma unroll
  for (int k = 0; k < 4; ++k) b[k] = a[k];
#pragma unroll
  for (int stage = 0; stage < 2; ++stage) {
    const int bit = 1 << stage;
    const bool hi = (t & bit) != 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (k & bit) continue;  // pairs (k, k + bit)
      const uint32_t send = hi ? b[k] : b[k + bit];
      const uint32_t got = __shfl_xor_sync(0xffffffffu, send, bit);
      b[k] = hi ? got : b[k];
      b[k + bit] = hi ? b[k + bit] : got;
    }
  }
}

// The operand's bits of one output (fp8: static tensor scale s, inv_s = __frcp_rn(s); the
// branch-free quant_tensor_rcp gives quant_tensor's bits).
template <bool kFp8>
__device__ __forceinline__ uint32_t operand_bits(__nv_bfloat16 a, float s, float inv_s) {
  if constexpr (kFp8) return quant_tensor_rcp(__bfloat162float(a), s, inv_s);
  else return __bfloat16_as_ushort(a);
}

// The mainloop for halves layouts: CUTLASS's ptr-array TMA mainloop (Base, built with a dynamic
// L stride for B so that its B descriptor is 3-D: k, n, l) with the B descriptor of each group
// re-dimensioned after CUTLASS writes it. GEMM1's n coordinate of a 256-column tile is 256 t; the
// descriptor then reads, with row stride K / 2 and an element stride of 2 along n, rows
// 128 t .. 128 t + 127 of the first half (l = 0) and, through l (extent 2, stride N / 2 rows, box
// 2), the same rows of the second half (l = 1): the box lands in shared memory as those 128 rows
// followed by the other 128, exactly where a 256-row box would put rows 0 .. 255. Same bytes per
// stage, same transaction count. (A 128-column tile, the fp8-block instance: coordinate 128 t,
// rows 64 t .. 64 t + 63 of each half, 64 + 64 rows where a 128-row box would put them.) When N is
// not a multiple of 128, the last tile's coordinates past
// N (the n extent stays the problem's 2N, which is 2 x N / 2 half rows) are out of bounds in both
// halves and the TMA fills zeros: no row of the other half or of the next expert is read. The setup kernel asks for it per group by a B row stride that is
// not K (K / 2, with the l stride N / 2 rows); interleaved groups (row stride K) run untouched.
template <class Base>
struct PairedHalvesMainloop : Base {
  template <class TensorMapA, class TensorMapB, class ProblemShapeMNKL>
  CUTLASS_DEVICE void tensormaps_perform_update(typename Base::TensorMapStorage& shared_tensormaps,
                                                typename Base::Params const& mainloop_params,
                                                cute::tuple<TensorMapA, TensorMapB> const& input_tensormaps,
                                                ProblemShapeMNKL problem_shape_mnkl, int32_t next_batch) {
    Base::tensormaps_perform_update(shared_tensormaps, mainloop_params, input_tensormaps, problem_shape_mnkl,
                                    next_batch);
    __syncwarp();
    const int64_t row_stride = cute::get<0>(mainloop_params.dB[next_batch]);
    if (row_stride != static_cast<int64_t>(cute::get<2>(problem_shape_mnkl)) && cute::elect_one_sync()) {
      const uint32_t d = cute::cast_smem_ptr_to_uint(&shared_tensormaps.smem_tensormap_B);
      // dims: 0 = k, 1 = n, 2 = l (CUTLASS wrote l's extent 1 and box 1; strides came from dB).
      asm volatile("tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 2, %1;" ::"r"(d), "r"(2));
      asm volatile("tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%0], 2, %1;" ::"r"(d), "r"(2));
      asm volatile("tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%0], 1, %1;" ::"r"(d), "r"(2));
    }
  }
};

// kChannel: per-channel dequant (fp8-channel: a_row[r] x w[e, col] per output, fix_h's factor),
// the output then a 16-bit operand (the per-row fp8 quantisation needs the row's amax: a
// separate pass over the bf16 rows).
template <bool kFp8Operand, bool kChannel = false>
class GatedActEpilogue {
 public:
  using EpilogueSchedule = cutlass::epilogue::PtrArrayNoSmemWarpSpecialized;
  using DispatchPolicy = EpilogueSchedule;
  // Nominal types the kernel and adapter ask for; D is written by operator() below only.
  using ThreadEpilogueOp = cutlass::epilogue::thread::LinearCombination<float, 1, float, float>;
  using ElementOutput = float;
  using ElementAccumulator = float;
  using ElementCompute = float;
  using ElementScalar = float;
  using ElementC = void;
  using StrideC = cutlass::detail::TagToStrideC_t<cutlass::layout::RowMajor*>;
  using InternalStrideC = cute::remove_pointer_t<StrideC>;
  using ElementD = float;
  using StrideD = StrideC;
  using InternalStrideD = InternalStrideC;
  using GmemElementC = float;
  using GmemTiledCopyC = void;
  using GmemTiledCopyD = void;

  struct SharedStorage {};
  using TensorMapStorage = SharedStorage;

  struct Arguments {
    ActivationParams act;                 // out: GEMM2's operand [rows, N]
    const int32_t* offsets = nullptr;     // device expert offsets: group g's rows start at offsets[g]
  };
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void*) {
    return args;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&, int) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const& args) {
    return args.act.out != nullptr && args.offsets != nullptr;
  }

  CUTLASS_HOST_DEVICE GatedActEpilogue(Params const& p) : params(p) {}
  CUTLASS_DEVICE bool is_source_needed() { return false; }

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine, class FrgLayout,
            class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK blk_shape_MNK,
                                 BlockCoordMNKL blk_coord_mnkl, cute::Tensor<FrgEngine, FrgLayout> const& acc,
                                 TiledMma tiled_mma, ResidueMNK, int thread_idx, char*) {
    using namespace cute;
    const int M = get<0>(problem_shape_mnkl);  // rows of this expert
    const int R = get<1>(problem_shape_mnkl);  // GEMM1 columns (2 N, even)
    auto [m_coord, n_coord, k_coord, l_coord] = blk_coord_mnkl;
    const int64_t e = l_coord;
    const ActivationParams& p = params.act;
    const int64_t row0 = params.offsets[e];
    // The expert's dequant factor (NONE or TENSOR here: the same for every row of the tile).
    const float ds = row_factor(p, row0, e, p.dq.kind == Dequant::TENSOR ? tensor_scale_value(p.dq.a_tensor) : 1.0f);
    // (kFp8Operand: sm90_gemm1_act_applies sends fp8 operands here with TENSOR_STATIC only.)
    const float s = p.quant == Fp8Quant::TENSOR_STATIC ? tensor_scale_value(p.scale) : 1.0f;
    const float inv_s = __frcp_rn(s);
    const float* const bias_e = p.bias ? p.bias + e * p.R : nullptr;

    Tensor coords = local_tile(make_identity_tensor(make_shape(M, R)), take<0, 2>(blk_shape_MNK),
                               make_coord(m_coord, n_coord));
    Tensor tc = tiled_mma.get_thread_slice(thread_idx).partition_C(coords);
    static_assert(is_static<FrgLayout>::value, "accumulator layout must be static");
    constexpr int kValues = decltype(size(acc))::value;
    static_assert(kValues % 4 == 0, "pairs of accumulators");
    // Addresses: the thread's first element (m0, c0) once, then per element the fragment's static
    // offsets (dm, dc), so each store is a base register plus constants.
    const int m0 = get<0>(tc(0)), c0 = get<1>(tc(0));
    // The dequant factor of the output at tile row m0 + dm, GEMM1 column col: per expert, or
    // (kChannel) a_row[r] x w[e, col] as fix_h (rows past M read the expert's first row).
    const float* const w_e = kChannel ? p.dq.w + e * p.R : nullptr;
    auto dsc = [&](int dm, int col) -> float {
      if constexpr (kChannel) {
        const int r = m0 + dm < M ? m0 + dm : 0;
        return __fmul_rn(__ldg(p.dq.a_row + row0 + r), __ldg(w_e + col));
      } else {
        return ds;
      }
    };
    constexpr int kOutBytes = kFp8Operand ? 1 : 2;
    // Halves: the output column of value 0 (below). A tile of kTileN columns holds kTileN / 2
    // rows of each half (PairedHalvesMainloop), outputs n_coord * kTileN / 2 on.
    constexpr int kTileN = decltype(cute::size<1>(blk_shape_MNK))::value;
    static_assert(kTileN == 128 || kTileN == 256, "halves pairing: 64 or 128 rows of each half per tile");
    const int64_t halves_o0 = c0 - static_cast<int64_t>(n_coord) * (kTileN / 2);
    // Every value is computed, rows past M included (the TMA's zeros), and only the stores are
    // predicated (st_if): the unrolled loop has no branch, so nvcc overlaps the activations of
    // many outputs. Measured against taking one branch per row of the fragment (skipping rows
    // past M): that was 9% faster on Mixtral fp8 (full tiles) but 5-7% slower on DeepSeek-V3 at
    // 4096 tokens (H100, 2026-11-22, bench/results/2026-11-22-h100-branch-free-epilogue).
    auto tile = [&](auto act, auto fp8, auto bias) {
      constexpr Activation kA = decltype(act)::value;
      constexpr bool kB = decltype(bias)::value;
      constexpr bool kF = decltype(fp8)::value;
      if (p.interleaved) {
        // Values 2j, 2j + 1: GEMM1 columns c, c + 1 (c even), output c / 2.
        char* const base = static_cast<char*>(p.out) + ((row0 + m0) * p.N + c0 / 2) * kOutBytes;
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < kValues; i += 2) {
          const int dm = get<0>(tc(i)) - m0, dc = get<1>(tc(i)) - c0;  // dc even: pairs start at even columns
          const bool in = c0 + dc < R;
          const int col = in ? c0 + dc : 0;  // the bias row is read in bounds past R too
          const __nv_bfloat16 v = gated_act_value<kA, kB>(p, dsc(dm, col), dsc(dm, col + 1), bias_e, col, col + 1, acc(i), acc(i + 1));
          st_if(m0 + dm < M && in, base + (dm * p.N + dc / 2) * kOutBytes, operand_bits<kF>(v, s, inv_s), kOutBytes);
        }
      } else {
        // Values j < kValues / 2 sit in the tile's first kTileN / 2 columns: first-half row
        // n_coord * kTileN / 2 + (column - n_coord * kTileN); value j + kValues / 2 is the same row
        // of the second half
        // (PairedHalvesMainloop). Values j, j + 1 are adjacent outputs, one store (N even:
        // sm90_gemm1_act_applies), both past N in the last tile when N % 128 != 0.
        char* const base = static_cast<char*>(p.out) + ((row0 + m0) * p.N + halves_o0) * kOutBytes;
        const int n2 = static_cast<int>(p.N);
        if constexpr (kTileN == 256) {
          // One store per pair (the bf16 / fp8-tensor instances): the vector stores below put the
          // 128 accumulators of this tile in local memory (a 944-byte stack frame, nvcc 13.0).
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < kValues / 2; i += 2) {
            const int dm = get<0>(tc(i)) - m0, dc = get<1>(tc(i)) - c0;
            const bool in = static_cast<int>(halves_o0) + dc < n2;
            const int o = in ? static_cast<int>(halves_o0) + dc : 0;  // the bias row is read in bounds
            const __nv_bfloat16 a0 = gated_act_value<kA, kB>(p, dsc(dm, o), dsc(dm, n2 + o), bias_e, o, n2 + o, acc(i), acc(i + kValues / 2));
            const __nv_bfloat16 a1 =
                gated_act_value<kA, kB>(p, dsc(dm, o + 1), dsc(dm, n2 + o + 1), bias_e, o + 1, n2 + o + 1, acc(i + 1),
                                    acc(i + 1 + kValues / 2));
            st_if(m0 + dm < M && in, base + (dm * p.N + dc) * kOutBytes,
                  operand_bits<kF>(a0, s, inv_s) | (operand_bits<kF>(a1, s, inv_s) << (8 * kOutBytes)), 2 * kOutBytes);
          }
        } else {
          // The pairs' operand bits first (one copy of the activation arithmetic: with a second
          // copy for the scalar stores nvcc stopped unrolling and kept the accumulators in local
          // memory), then the stores.
          uint32_t pk[kValues / 4];
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < kValues / 2; i += 2) {
            const int dm = get<0>(tc(i)) - m0, dc = get<1>(tc(i)) - c0;
            const bool in = static_cast<int>(halves_o0) + dc < n2;
            const int o = in ? static_cast<int>(halves_o0) + dc : 0;  // the bias row is read in bounds
            const __nv_bfloat16 a0 = gated_act_value<kA, kB>(p, dsc(dm, o), dsc(dm, n2 + o), bias_e, o, n2 + o, acc(i), acc(i + kValues / 2));
            const __nv_bfloat16 a1 =
                gated_act_value<kA, kB>(p, dsc(dm, o + 1), dsc(dm, n2 + o + 1), bias_e, o + 1, n2 + o + 1, acc(i + 1),
                                    acc(i + 1 + kValues / 2));
            pk[i / 2] = operand_bits<kF>(a0, s, inv_s) | (operand_bits<kF>(a1, s, inv_s) << (8 * kOutBytes));
          }
          if (n2 % 8 == 0) {
            // Whole 8-output vectors (16-byte aligned rows): a quad transpose per 4 blocks, one
            // vector store per block and row (quad_transpose4). Value i is column i % 2 of its pair,
            // row half (i / 2) % 2, 8-column block i / 4 of the fragment.
            constexpr int kBlocks = kValues / 8;  // blocks per row half in the first kTileN / 2 columns
            static_assert(kBlocks % 4 == 0, "whole quads of blocks");
            const int t = static_cast<int>(threadIdx.x & 3);
            CUTLASS_PRAGMA_UNROLL
            for (int hj = 0; hj < 2 * (kBlocks / 4); ++hj) {
              const int h = hj % 2, j = hj / 2;
              const uint32_t a[4] = {pk[h + 2 * (4 * j)], pk[h + 2 * (4 * j + 1)], pk[h + 2 * (4 * j + 2)],
                                     pk[h + 2 * (4 * j + 3)]};
              uint32_t q[4];
              quad_transpose4(a, q, t);
              // Block 4 j + t: its first column is this lane's pair column minus 2 t.
              const int dm = get<0>(tc(2 * h)) - m0;
              const int d0 = get<1>(tc(16 * j)) - c0, d1 = get<1>(tc(16 * j + 4)) - c0,
                        d2 = get<1>(tc(16 * j + 8)) - c0, d3 = get<1>(tc(16 * j + 12)) - c0;
              const int dcb = (t == 0 ? d0 : t == 1 ? d1 : t == 2 ? d2 : d3) - 2 * t;
              const bool pred = m0 + dm < M && static_cast<int>(halves_o0) + dcb < n2;
              char* dst = base + (static_cast<int64_t>(dm) * p.N + dcb) * kOutBytes;
              if constexpr (kOutBytes == 2) {
                asm volatile("{.reg .pred p; setp.ne.b32 p, %5, 0; @p st.global.v4.b32 [%0], {%1, %2, %3, %4};}" ::"l"(dst),
                             "r"(q[0]), "r"(q[1]), "r"(q[2]), "r"(q[3]), "r"(int(pred)) : "memory");
              } else {
                asm volatile("{.reg .pred p; setp.ne.b32 p, %3, 0; @p st.global.v2.b32 [%0], {%1, %2};}" ::"l"(dst),
                             "r"(q[0] | (q[1] << 16)), "r"(q[2] | (q[3] << 16)), "r"(int(pred)) : "memory");
              }
            }
          } else {
            CUTLASS_PRAGMA_UNROLL
            for (int i = 0; i < kValues / 2; i += 2) {
              const int dm = get<0>(tc(i)) - m0, dc = get<1>(tc(i)) - c0;
              const bool in = static_cast<int>(halves_o0) + dc < n2;
              st_if(m0 + dm < M && in, base + (dm * p.N + dc) * kOutBytes, pk[i / 2], 2 * kOutBytes);
            }
          }
        }
      }
    };
    // One instance per (activation, bias) of this operand type: the store is fixed by the operand
    // (fp8 operands always take the static tensor scale here, 16-bit ones store the value).
    auto with_bias = [&](auto act) {
      if (p.bias) tile(act, cute::bool_constant<kFp8Operand>{}, cute::true_type{});
      else tile(act, cute::bool_constant<kFp8Operand>{}, cute::false_type{});
    };
    switch (p.act) {
      case Activation::SILU: with_bias(std::integral_constant<Activation, Activation::SILU>{}); break;
      case Activation::GELU: with_bias(std::integral_constant<Activation, Activation::GELU>{}); break;
      case Activation::GELU_TANH: with_bias(std::integral_constant<Activation, Activation::GELU_TANH>{}); break;
      default: with_bias(std::integral_constant<Activation, Activation::SWIGLUOAI>{}); break;
    }
  }

 private:
  Params params;
};

// The grouped GEMM1 + activation: the many-rows-per-expert (activations as A) form of
// GroupedGemm's mainloop with the epilogue above. One instance per operand type
// (sm90_grouped_gemm_<family>_act.cu).
// kFp8Out: the epilogue stores e4m3 codes (static tensor scale), else bf16 values; kChannel: the
// epilogue applies per-channel dequant (fp8-channel, bf16 output).
template <class Element, class Config, bool kFp8Out = cute::is_same_v<Element, cutlass::float_e4m3_t>,
          bool kChannel = false>
struct GroupedGemmAct {
  using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
  using Shape3 = typename ProblemShape::UnderlyingProblemShape;
  static constexpr int kAlignAB = 128 / cutlass::sizeof_bits<Element>::value;
  using TileShape = typename Config::TileShape;
  using CollectiveEpilogue = cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<
      GatedActEpilogue<kFp8Out, kChannel>>;
  // B as K-major rows with a dynamic l stride (instead of ColumnMajor*'s static 0), so CUTLASS
  // builds a 3-D B descriptor that PairedHalvesMainloop can re-dimension for halves layouts.
  using StrideBTag = cute::Stride<int64_t, cute::Int<1>, int64_t>*;
  // GatherAMainloop: A's rows straight from the token-major input where the call asks for it
  // (GroupedGemmArgs::gather_x; sm90_gather_a_mainloop.cuh), CUTLASS's loads otherwise.
  // SiblingSyncMainloop: the M tiles of a weight column start each tile together (sm90_sibling_sync_mainloop.cuh).
  using CollectiveMainloop = PairedHalvesMainloop<SiblingSyncMainloop<GatherAMainloop<
      typename cutlass::gemm::collective::CollectiveBuilder<
          cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor*, kAlignAB, Element,
          StrideBTag, kAlignAB, float, TileShape, typename Config::ClusterShape,
          cutlass::gemm::collective::StageCountAutoCarveout<0>, typename Config::KernelSchedule>::CollectiveOp>>>;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  static_assert(cute::size<1>(TileShape{}) == 256, "halves pairing: 128 rows of each half per tile");

  struct Arrays {
    Shape3* problems;
    const Element** ptr_a;
    const Element** ptr_b;
    StrideA* stride_a;
    StrideB* stride_b;
    int32_t* sibling;  // the sibling sync's counters [groups][kSiblingMaxNTiles]
    void* cutlass_workspace;
  };
  static Arrays carve(void* base, int groups, size_t* total) {
    WorkspaceCarve w(base);
    const size_t g = static_cast<size_t>(groups);
    Arrays a;
    a.problems = w.take<Shape3>(g);
    a.ptr_a = w.take<const Element*>(g);
    a.ptr_b = w.take<const Element*>(g);
    a.stride_a = w.take<StrideA>(g);
    a.stride_b = w.take<StrideB>(g);
    a.sibling = w.take<int32_t>(g * kSiblingMaxNTiles);
    a.cutlass_workspace = w.next();
    *total = w.used();
    return a;
  }
  static typename Gemm::Arguments arguments(const Arrays& arr, int groups, int device, int sm_count,
                                            const ActivationParams& act, const int32_t* offsets,
                                            const GroupedGemmArgs* g = nullptr) {
    cutlass::KernelHardwareInfo hw;
    hw.device_id = device;
    hw.sm_count = sm_count;
    typename Gemm::Arguments args;
    args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
    args.problem_shape = {groups, arr.problems, nullptr};
    args.mainloop.ptr_A = arr.ptr_a;
    args.mainloop.dA = arr.stride_a;
    args.mainloop.ptr_B = arr.ptr_b;
    args.mainloop.dB = arr.stride_b;
    if (g != nullptr && g->gather_x != nullptr) {
      args.mainloop.gather_x = g->gather_x;
      args.mainloop.gather_row_bytes = g->k * static_cast<int64_t>(sizeof(Element));
      args.mainloop.gather_row_slot = g->gather_row_slot;
      args.mainloop.gather_offsets = g->expert_offsets;
      args.mainloop.gather_topk = g->gather_topk;
    }
    // The sibling sync where A comes by TMA over the permuted operand. With A gathered row by row
    // (DeepSeek-V3 TP8-like shapes) it changed neither the DRAM bytes (1.08 GB) nor the time
    // (GEMM1 1.00-1.01x; bench/results/2026-11-27-h100-sibling-sync).
    if (g != nullptr && g->gather_x == nullptr && sibling_sync_on())
      set_sibling_sync(args.mainloop, arr.sibling, g->n, cute::size<1>(TileShape{}));
    args.epilogue.act = act;
    args.epilogue.offsets = offsets;
    args.hw_info = hw;
    return args;
  }
  static size_t workspace_bytes(int groups, int sm_count) {
    size_t arrays = 0;
    Arrays arr = carve(nullptr, groups, &arrays);
    const auto args = arguments(arr, groups, 0, sm_count, ActivationParams{}, nullptr);
    return arrays + WorkspaceCarve::align(Gemm::get_workspace_size(args));
  }
  static void run(const GroupedGemmArgs& g, const ActivationParams& act, cudaStream_t stream);
};

template <class Element, class StrideA, class StrideB, class Shape3>
__global__ void setup_act_groups_kernel(int groups, const int32_t* offsets, int n, int k, const Element* a,
                                        const Element* b, Shape3* problems, const Element** ptr_a,
                                        const Element** ptr_b, StrideA* stride_a, StrideB* stride_b,
                                        bool halves, bool gather, int32_t* sibling, int sibling_per_group) {
  chain_wait();
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  for (int i = 0; i < sibling_per_group; ++i) sibling[static_cast<int64_t>(g) * sibling_per_group + i] = 0;
  const int64_t row0 = offsets[g];
  const int rows = offsets[g + 1] - offsets[g];
  problems[g] = Shape3{rows, n, k};
  ptr_a[g] = gather ? a : a + row0 * k;  // gathered: the token-major tensor, rows found per tile
  ptr_b[g] = b + static_cast<int64_t>(g) * n * k;
  stride_a[g] = cutlass::make_cute_packed_stride(StrideA{}, {rows, k, 1});
  StrideB sb{};
  if (halves) {  // PairedHalvesMainloop: row stride k / 2 (element stride 2), l = the second half
    cute::get<0>(sb) = k / 2;
    cute::get<2>(sb) = static_cast<int64_t>(n / 2) * k;
  } else {
    cute::get<0>(sb) = k;
    cute::get<2>(sb) = static_cast<int64_t>(n) * k;  // l extent 1: never stepped
  }
  stride_b[g] = sb;
}

template <class Element, class Config, bool kFp8Out, bool kChannel>
void GroupedGemmAct<Element, Config, kFp8Out, kChannel>::run(const GroupedGemmArgs& g, const ActivationParams& act, cudaStream_t stream) {
  size_t arrays_bytes = 0;
  const Arrays arr = carve(g.workspace, g.groups, &arrays_bytes);
  const unsigned blocks = static_cast<unsigned>((g.groups + 127) / 128);
  const bool gather = g.gather_x != nullptr;
  launch_chained(setup_act_groups_kernel<Element, StrideA, StrideB, Shape3>, blocks, 128, 0, stream, g.groups,
                 g.expert_offsets, static_cast<int>(g.n), static_cast<int>(g.k),
                 static_cast<const Element*>(gather ? g.gather_x : g.a), static_cast<const Element*>(g.b),
                 arr.problems, arr.ptr_a, arr.ptr_b, arr.stride_a, arr.stride_b, !act.interleaved, gather,
                 arr.sibling, sibling_counters_per_group(g.n, cute::size<1>(TileShape{})));
  const auto args = arguments(arr, g.groups, g.device, g.sm_count, act, g.expert_offsets, &g);
  Gemm gemm;
  check_cutlass(gemm.can_implement(args), "can_implement (GEMM1 + activation)");
  check_cutlass(gemm.initialize(args, arr.cutlass_workspace, stream), "initialize (GEMM1 + activation)");
  check_cutlass(gemm.run(stream), "run (GEMM1 + activation)");
}

}  // namespace fusedmoe::cuda::sm90
