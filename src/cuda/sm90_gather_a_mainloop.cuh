#pragma once
// GEMM1 with its activation rows gathered inside the mainloop: a wrapper for CUTLASS's ptr-array
// TMA mainloop that, when the call asks for it (Params::gather_row_slot set), copies each A tile
// from the token-major input by row (cp.async through the LSU) instead of one TMA box over the
// permuted operand. B keeps CUTLASS's TMA loads.
//
// Why: at large batches the permute wrote every slot's copy of its token's row (topk copies of
// hidden_states) and GEMM1 read them back: DeepSeek-V3 at 4096 tokens, 8 slots per token, writes
// and re-reads 235 MB (fp8) / 470 MB (bf16) that the roofline does not count (permute stage
// 0.12 / 0.21 ms of a 1.14 / 1.81 ms layer on an H100). Gathered, the permute writes nothing for
// bf16 inputs (GEMM1 reads hidden_states itself) and one quantised copy per token for static
// fp8-tensor, and GEMM1's A tiles come from a tensor small enough to stay mostly in L2.
// One TMA per 128-byte row was tried first and cost ~60 cycles per copy per SM (1.8-3.8x the
// layer, bench/results/2026-11-27-h100-gemm1-gather): a row gather needs the LSU.
//
// How (the producer warp; consumers and epilogue untouched):
// - Each stage's A block is 128 rows of 128 bytes (one 128-byte swizzle row each, 1024-byte
//   aligned stages): 16-byte chunk c of row r lives at r * 128 + 16 * (c ^ (r % 8)), where the
//   128-row TMA box would put it. Lane l copies chunk l % 8 of rows l / 8 + 4 i (i < 32):
//   eight lanes cover a row's 128 contiguous bytes. Rows past the group's end and chunks past
//   K are zero-filled (cp.async with source size 0: no global read).
// - Where it pays: the copies go through the LSU, which moved ~16 KB per ~1800 cycles per SM
//   here (Mixtral bf16, ncu: the producer warp busy ~85% of its samples, the tensor pipe 83 ->
//   60% active): the gathered GEMM1 is slower than CUTLASS's TMA loads of the permuted operand
//   wherever it was measured, and the layer gains only where the permute's operand round trip
//   outweighs that - few column tiles per row (sm90_gemm1_gather_applies).
// - The stage's full barrier (CUTLASS's TMA pipeline: one expected arrival plus a transaction
//   count) stays open until the copies land: every lane issues cp.async.mbarrier.arrive (without
//   .noinc: the pending count rises by one at once and falls when the lane's copies complete),
//   then, after __syncwarp, lane 0 arrives with B's byte count as the transaction count. The
//   consumers wait on that barrier as before and the wgmma reads the stage with no proxy fence -
//   the contract of CUTLASS's own cp.async + wgmma mainloop for sm90
//   (sm90_mma_multistage_gmma_ss_warpspecialized.hpp: cp.async, cp.async.mbarrier.arrive,
//   consumer_wait, wgmma). A first version that waited for its copies (cp.async.wait_group),
//   fenced (fence.proxy.async) and arrived kDefer stages later was correct but 1.14-1.31x the
//   layer time at Mixtral's compute-bound points (bench/results/2026-11-27-h100-gemm1-cpasync).
#include <cstdint>

#include "cuda/mbarrier.cuh"
#include "cute/arch/copy_sm90_tma.hpp"
#include "cute/tensor.hpp"
#include "cutlass/arch/barrier.h"
#include "cutlass/cutlass.h"

namespace fusedmoe::cuda::sm90 {

template <class Base>
struct GatherAMainloop : Base {
  using typename Base::MainloopPipeline;
  using typename Base::PipelineState;
  using typename Base::TensorStorage;
  using typename Base::TensorMapStorage;
  using ElementA = typename Base::InternalElementA;
  using ElementB = typename Base::InternalElementB;
  static constexpr int kTileM = cute::size<0>(typename Base::TileShape{});
  static constexpr int kRowBytes =
      cute::size<2>(typename Base::TileShape{}) * cutlass::sizeof_bits<ElementA>::value / 8;
  static constexpr int kStageBytesA = kTileM * kRowBytes;
  static constexpr uint32_t kStageBytesB = static_cast<uint32_t>(
      cutlass::bits_to_bytes(cute::size<0>(typename Base::SmemLayoutB{}) * cute::size<1>(typename Base::SmemLayoutB{}) *
                             static_cast<uint32_t>(cutlass::sizeof_bits<ElementB>::value)));
  static constexpr int kStages = Base::DispatchPolicy::Stages;
  static constexpr uint32_t kDead = 0xffffffffu;  // a row past the group's end
  static_assert(kTileM == 128, "lane l copies rows l / 8 + 4 i, i < 32: 128-row tiles");
  static_assert(kRowBytes == 128, "a tile row is one 128-byte swizzle row (8 chunks of 16 bytes)");
  static_assert(cute::cosize_v<typename Base::SmemLayoutA> * sizeof(ElementA) ==
                    static_cast<size_t>(kStageBytesA) * cute::size<2>(typename Base::SmemLayoutA{}),
                "A stages are contiguous 16 KB blocks of 128-byte rows");
  static_assert(Base::TmaTransactionBytes == kStageBytesA + kStageBytesB, "A + B bytes per stage");
  // The empty barriers are found from the full ones: CUTLASS's pipeline storage is
  // {full[Stages], empty[Stages]}, 8 bytes each.
  static_assert(sizeof(typename MainloopPipeline::SharedStorage) == 16 * kStages, "pipeline barrier storage");

  struct Arguments : Base::Arguments {
    // Gathered A (null: CUTLASS's loads of the permuted operand, ptr_a per group as usual).
    const void* gather_x = nullptr;            // [tokens, K] of ElementA, token-major, 16-byte aligned
    int64_t gather_row_bytes = 0;              // K * sizeof(ElementA), a multiple of 16
    const int32_t* gather_row_slot = nullptr;  // [rows] slot of each permuted row
    const int32_t* gather_offsets = nullptr;   // [groups + 1] first row of each group
    int32_t gather_topk = 1;                   // slot / topk = token
  };
  struct Params : Base::Params {
    const void* gather_x = nullptr;
    int64_t gather_row_bytes = 0;
    const int32_t* gather_row_slot = nullptr;
    const int32_t* gather_offsets = nullptr;
    int32_t gather_topk = 1;
  };

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape problem_shapes, Arguments const& args,
                                                  void* workspace) {
    Params p;
    static_cast<typename Base::Params&>(p) = Base::to_underlying_arguments(problem_shapes, args, workspace);
    p.gather_x = args.gather_x;
    p.gather_row_bytes = args.gather_row_bytes;
    p.gather_row_slot = args.gather_row_slot;
    p.gather_offsets = args.gather_offsets;
    p.gather_topk = args.gather_topk;
    return p;
  }

  // Producer state of the current group (every lane of the producer warp keeps a copy).
  int32_t group_rows_ = 0;
  int32_t group_row0_ = 0;

  template <class TensorMaps, class ProblemShapeMNKL>
  CUTLASS_DEVICE void tensormaps_perform_update(TensorMapStorage& shared_tensormaps, Params const& mainloop_params,
                                                TensorMaps const& input_tensormaps,
                                                ProblemShapeMNKL problem_shape_mnkl, int32_t next_batch) {
    Base::tensormaps_perform_update(shared_tensormaps, mainloop_params, input_tensormaps, problem_shape_mnkl,
                                    next_batch);
    if (mainloop_params.gather_row_slot == nullptr) return;
    group_rows_ = static_cast<int32_t>(cute::get<0>(problem_shape_mnkl));
    group_row0_ = mainloop_params.gather_offsets[next_batch];
  }

  template <class LoadInputs, class TensorMaps, class BlockCoord, class KTileIterator>
  CUTLASS_DEVICE void load(Params const& mainloop_params, MainloopPipeline pipeline, PipelineState smem_pipe_write,
                           LoadInputs const& load_inputs, TensorMaps const& input_tensormaps,
                           BlockCoord const& blk_coord, KTileIterator k_tile_iter, int k_tile_count, int thread_idx,
                           uint32_t block_rank_in_cluster, TensorStorage& shared_tensors) {
    using namespace cute;
    if (mainloop_params.gather_row_slot == nullptr) {
      Base::load(mainloop_params, pipeline, smem_pipe_write, load_inputs, input_tensormaps, blk_coord, k_tile_iter,
                 k_tile_count, thread_idx, block_rank_in_cluster, shared_tensors);
      return;
    }
    static_assert(size(typename Base::DispatchPolicy::ClusterShape{}) == 1, "no multicast: one CTA per cluster");
    if (k_tile_count <= 0) return;
    const int lane = static_cast<int>(threadIdx.x % 32);
    const bool lane0 = lane == 0;  // CUTLASS's pipeline leader (producer warpgroup thread 0)
    auto [m_coord, n_coord, k_coord, l_coord] = blk_coord;
    // Byte offsets in x of rows lane + 32 j of the tile (kDead past the group's end: zero-filled,
    // no global read - loading token 0's row there instead made DeepSeek-V3 TP8's layer ~6% slower,
    // the copies being the gather's bound). sm90_gemm1_gather_applies keeps tokens x row bytes
    // within 32 bits (offsets are 16-byte multiples, never kDead).
    const uint32_t row_bytes32 = static_cast<uint32_t>(mainloop_params.gather_row_bytes);
    uint32_t row_off[4];
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < 4; ++j) {
      const int32_t row = static_cast<int32_t>(m_coord) * kTileM + lane + 32 * j;
      row_off[j] = row < group_rows_ ? static_cast<uint32_t>(mainloop_params.gather_row_slot[group_row0_ + row] /
                                                             mainloop_params.gather_topk) *
                                           row_bytes32
                                     : kDead;
    }
    // B exactly as CUTLASS's load.
    auto block_tma_b = mainloop_params.tma_load_b.get_slice(0);
    Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_B.data()), typename Base::SmemLayoutB{});
    Tensor gB = get<1>(load_inputs)(_, _, n_coord, _, l_coord);  // (BLK_N, BLK_K, k)
    Tensor tBgB = block_tma_b.partition_S(gB);
    Tensor tBsB = block_tma_b.partition_D(sB);

    const uint32_t sA = cast_smem_ptr_to_uint(shared_tensors.smem_A.data());
    const char* x = static_cast<const char*>(mainloop_params.gather_x);
    // Lane l copies chunk l % 8 of rows l / 8 + 4 i (i < 32): eight lanes read a row's 128
    // contiguous bytes, so each warp instruction is four whole 128-byte lines. (Four lanes per row -
    // two chunks per lane, eight rows per instruction, half the instructions - was 1.1-1.5x slower:
    // the copies' line requests, not the producer's instruction count, bound the gather.)
    const int chunk = lane & 7;
    const int row_lane = lane >> 3;
    // Row r = row_lane + 32 q + 4 p (q < 4, p < 8) is row_off[q] of lane row_lane + 4 p; its chunk
    // sits at r * 128 + 16 * (chunk ^ (r % 8)), r % 8 = row_lane + 4 (p % 2): two swizzled lane
    // bases, the rest compile-time offsets.
    const uint32_t lane_dst0 = static_cast<uint32_t>(row_lane * kRowBytes + ((chunk ^ row_lane) << 4));
    const uint32_t lane_dst1 = static_cast<uint32_t>(row_lane * kRowBytes + ((chunk ^ (row_lane + 4)) << 4));
    const char* x_lane = x + 16 * chunk;
    uint64_t* full0 = pipeline.producer_get_barrier(smem_pipe_write) - smem_pipe_write.index();

    CUTLASS_PRAGMA_NO_UNROLL
    for (; k_tile_count > 0; --k_tile_count) {
      const int stage = smem_pipe_write.index();
      uint64_t* full = full0 + stage;
      cutlass::arch::ClusterBarrier::wait(full0 + kStages + stage, smem_pipe_write.phase());  // stage free
      const uint32_t k_byte = static_cast<uint32_t>(*k_tile_iter) * kRowBytes;
      // Chunks past K read as zeros (source size 0; only where K is not a multiple of the tile's).
      const uint32_t bytes = k_byte + 16 * chunk < row_bytes32 ? 16u : 0u;
      const char* src_k = x_lane + k_byte;
      const uint32_t dst_stage = sA + static_cast<uint32_t>(stage * kStageBytesA);
      CUTLASS_PRAGMA_UNROLL
      for (int q = 0; q < 4; ++q) {
        CUTLASS_PRAGMA_UNROLL
        for (int p = 0; p < 8; ++p) {
          const uint32_t off = __shfl_sync(0xffffffffu, row_off[q], row_lane + 4 * p);
          const bool live = off != kDead;
          const uint32_t dst = dst_stage + ((p & 1) ? lane_dst1 : lane_dst0) + (32 * q + 4 * p) * kRowBytes;
          ::fusedmoe::cuda::cp_async16(dst, src_k + (live ? off : 0u), live ? bytes : 0u);
        }
      }
      // Each lane's copies hold the phase open (pending count + 1 now, - 1 once they land); all
      // of them before lane 0's arrival, which could otherwise complete the phase on B alone.
      cutlass::arch::cpasync_barrier_arrive(full);
      __syncwarp();
      if (lane0) {
        cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(full, kStageBytesB);
        copy(mainloop_params.tma_load_b.with(get<1>(input_tensormaps), *full, uint16_t(0)),
             tBgB(_, _, _, *k_tile_iter), tBsB(_, _, _, stage));
      }
      ++k_tile_iter;
      ++smem_pipe_write;
    }
  }
};

}  // namespace fusedmoe::cuda::sm90
