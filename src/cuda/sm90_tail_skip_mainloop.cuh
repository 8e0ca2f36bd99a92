#pragma once
// The last M tile of an expert without the idle warpgroup's MMAs: a wrapper for CUTLASS's
// cooperative ptr-array mainloops (two consumer warpgroups, one per 64-row half of a 128-row tile).
//
// Why: with uniform routing an expert's rows vary around their mean, and where that mean is a
// multiple of the 128-row tile (Mixtral-8x7B at 1024 tokens: 256 +- 14 rows per expert,
// Qwen3-30B-A3B at 4096: 256 +- 16, DeepSeek-V3 TP8 at 4096: 128 +- 11) about half the experts
// spill a few rows into one more tile that costs a whole tile's MMAs. Same binary and run, H100
// (bench/results/2026-11-27-h100-padding-probe): balanced routing (exactly the mean per expert)
// against uniform - Mixtral 1024 tokens 0.81x the layer time (bf16 and fp8-tensor), Qwen3 4096
// 0.91-0.94x, DeepSeek-V3 TP8 4096 0.93-0.94x. In such a tile the rows past the expert's end are
// the TMA's zeros; a warpgroup whose 64 rows all lie past it computes nothing that is stored, and
// both warpgroups share the SM's tensor cores, so skipping its MMAs halves the tile's MMA time.
//
// How: the producer (pipeline leader thread, which makes the stage's full-barrier arrival) writes
// the tile's remaining rows (group rows - first row of the tile) into a per-stage slot of this
// mainloop's shared storage before it loads the tile's first stage; a consumer warpgroup reads the
// slot once it has waited for that stage (the leader's mbarrier arrival releases, the consumers'
// wait acquires). Slots are kept per stage and per phase parity: the slot of a fill is written
// before the producer waits for that stage to be free, and the fill two before it with the same
// parity was released - so read - before the producer got past the previous fill's wait.
// A warpgroup with no rows in the tile then computes the tile's first k tile only (its accumulators
// must come from wgmma, see mma()) and waits for and releases the other stages in the order
// CUTLASS's mma() + mma_tail() do; the other warpgroup keeps CUTLASS's mma(); both meet at a named
// barrier at the tile's end. Nothing of the idle warpgroup's rows is stored (CUTLASS's TMA stores
// are bounded by the group's rows, GatedActEpilogue's warps without a row return early).
#include <climits>
#include <cstdint>

#include "cute/tensor.hpp"
#include "cutlass/arch/barrier.h"
#include "cutlass/cutlass.h"

namespace fusedmoe::cuda::sm90 {

// Shared memory a block may use on sm_90 (227 KB): the kernels' storage plus these slots must fit.
constexpr int kSm90MaxSmemBytes = 227 * 1024;

template <class Base>
struct TailSkipMainloop : Base {
  using typename Base::MainloopPipeline;
  using typename Base::PipelineState;
  using typename Base::TensorMapStorage;
  using typename Base::TiledMma;
  static constexpr int kTileM = cute::size<0>(typename Base::TileShape{});
  static constexpr int kStages = Base::DispatchPolicy::Stages;
  static constexpr int kWarpGroups = cute::size(TiledMma{}) / cutlass::NumThreadsPerWarpGroup;
  static_assert(kWarpGroups == 2 && cute::size<1>(typename TiledMma::ThrLayoutVMNK{}) == 2,
                "cooperative tiles: two consumer warpgroups along M");
  static constexpr int kRowsPerWarpGroup = kTileM / kWarpGroups;

  // tail_skip = false: every warpgroup runs CUTLASS's mma() (FUSEDMOE_TAIL_SKIP=0, tail_skip_enabled()).
  struct Arguments : Base::Arguments {
    bool tail_skip = true;
  };
  struct Params : Base::Params {
    bool tail_skip = true;
  };
  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape problem_shapes, Arguments const& args,
                                                  void* workspace) {
    Params p;
    static_cast<typename Base::Params&>(p) = Base::to_underlying_arguments(problem_shapes, args, workspace);
    p.tail_skip = args.tail_skip;
    return p;
  }

  struct TensorStorage : Base::TensorStorage {
    int32_t tile_rows[2 * kStages];  // [stage][consumer phase parity]: rows of the tile from its first row on
  };

  // Producer state: the current group's rows (every lane of the producer warp keeps a copy).
  int32_t tail_group_rows_ = 0;

  template <class TensorMaps, class ProblemShapeMNKL>
  CUTLASS_DEVICE void tensormaps_perform_update(TensorMapStorage& shared_tensormaps, Params const& mainloop_params,
                                                TensorMaps const& input_tensormaps,
                                                ProblemShapeMNKL problem_shape_mnkl, int32_t next_batch) {
    Base::tensormaps_perform_update(shared_tensormaps, mainloop_params, input_tensormaps, problem_shape_mnkl,
                                    next_batch);
    tail_group_rows_ = mainloop_params.tail_skip ? static_cast<int32_t>(cute::get<0>(problem_shape_mnkl)) : INT32_MAX;
  }

  template <class LoadInputs, class TensorMaps, class BlockCoord, class KTileIterator>
  CUTLASS_DEVICE void load(Params const& mainloop_params, MainloopPipeline pipeline,
                           PipelineState smem_pipe_write, LoadInputs const& load_inputs,
                           TensorMaps const& input_tensormaps, BlockCoord const& blk_coord, KTileIterator k_tile_iter,
                           int k_tile_count, int thread_idx, uint32_t block_rank_in_cluster,
                           TensorStorage& shared_tensors) {
    // The pipeline leader (thread 0 of the producer warpgroup) makes the full-barrier arrivals.
    if (k_tile_count > 0 && thread_idx % cutlass::NumThreadsPerWarpGroup == 0) {
      const int32_t m0 = static_cast<int32_t>(cute::get<0>(blk_coord)) * kTileM;
      // Consumer parity = producer phase ^ 1 (CUTLASS's producer state starts at phase 1).
      shared_tensors.tile_rows[2 * smem_pipe_write.index() + (smem_pipe_write.phase() ^ 1)] =
          tail_group_rows_ == INT32_MAX ? INT32_MAX : tail_group_rows_ - m0;
    }
    Base::load(mainloop_params, pipeline, smem_pipe_write, load_inputs, input_tensormaps, blk_coord, k_tile_iter,
               k_tile_count, thread_idx, block_rank_in_cluster, shared_tensors);
  }

  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC& accum, int k_tile_count,
                          int thread_idx, TensorStorage& shared_tensors, Params const& mainloop_params) {
    static_assert(Base::K_PIPE_MMAS == 1, "mma_tail() releases the tile's last stage");
    bool idle_in_tile = false, idle = false;
    if (k_tile_count > 1) {
      auto token = pipeline.consumer_try_wait(smem_pipe_read);
      pipeline.consumer_wait(smem_pipe_read, token);
      const int32_t rows = shared_tensors.tile_rows[2 * smem_pipe_read.index() + smem_pipe_read.phase()];
      const int wg = __shfl_sync(0xffffffffu, thread_idx / cutlass::NumThreadsPerWarpGroup, 0);
      idle_in_tile = rows <= (kWarpGroups - 1) * kRowsPerWarpGroup;
      idle = rows <= wg * kRowsPerWarpGroup;
    }
    // One call site of CUTLASS's mma() (a second, or any other instruction writing the
    // accumulators, made ptxas serialise every wgmma of the kernel, C7515). The idle warpgroup runs
    // the first k tile only (its rows are the TMA's zeros; the wait on that stage returns at once),
    // then waits for and releases the other stages: CUTLASS's mma() releases each stage one k tile
    // behind, mma_tail() the last one.
    Base::mma(pipeline, smem_pipe_read, accum, idle ? 1 : k_tile_count, thread_idx, shared_tensors, mainloop_params);
    if (idle) {
      cute::warpgroup_wait<0>();
      PipelineState release = smem_pipe_read;
      ++smem_pipe_read;
      for (int k = 1; k < k_tile_count; ++k) {
        auto t = pipeline.consumer_try_wait(smem_pipe_read);
        pipeline.consumer_wait(smem_pipe_read, t);
        ++smem_pipe_read;
        pipeline.consumer_release(release);
        ++release;
      }
    }
    // Both warpgroups took the same decision from the slot: in a tile with an idle warpgroup they
    // meet once the working one has issued its MMAs, so the idle one does not run ahead into the
    // next tile (ahead, it holds the stages it waited for and the producer refills the pipeline
    // only as the other releases them: 1.02-1.25x the GEMM time without this barrier, H100,
    // bench/results/2026-11-27-h100-tail-skip). User barrier 0: hardware barrier 8, after the ids
    // CUTLASS reserves.
    if (idle_in_tile) cutlass::arch::NamedBarrier::sync(kWarpGroups * cutlass::NumThreadsPerWarpGroup, 0u);
  }
};

}  // namespace fusedmoe::cuda::sm90
