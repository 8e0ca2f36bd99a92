#pragma once
// Sibling sync: a wrapper for a CUTLASS ptr-array TMA mainloop (any collective whose producer warp
// calls tensormaps_perform_update on a group change and load() once per work tile) that makes the
// CTAs of one weight column's M tiles start each tile together.
//
// Why: the persistent group scheduler walks a group's tiles M first, so the 2-3 M tiles that read
// one weight column tile run on neighbouring CTAs at the same time and share its reads in L2. Where
// an expert's last M tile holds only a few rows, its CTA moves fewer A bytes and stores fewer
// epilogue rows, finishes each tile a little early and drifts ahead of its siblings round after
// round; once they are further apart than L2 holds, the column is read from DRAM twice (balanced
// routing at 257 rows per expert: GEMM1 + activation read 2.54 GB of Mixtral-8x7B's 1.88 GB of
// weights, 1.92 GB at 256 rows; bench/results/2026-11-27-h100-tile-pattern-probe).
//
// How: before a tile's first load, lane 0 of the producer warp arrives on the counter of its
// (group, N tile) and polls (ld.acquire, 128 ns sleeps) until every M tile of that column has
// arrived. Counters: [groups][n_tiles] ints, zeroed before the launch by the instance's setup
// kernel. Columns of one M tile do not wait. It is a hint only, never needed for correctness:
// a CTA that polls spin_max times without seeing its siblings (one not resident, say, beside
// another stream's kernels) stops waiting for the rest of the launch, so nothing can hang on it.
#include <cstdint>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"

namespace fusedmoe::cuda::sm90 {

template <class Base>
struct SiblingSyncMainloop : Base {
  using typename Base::TensorMapStorage;
  static constexpr int kTileM = cute::size<0>(typename Base::TileShape{});

  struct Arguments : Base::Arguments {
    int32_t* sibling_counters = nullptr;  // null: no sync
    int32_t sibling_n_tiles = 0;          // counters per group (N tiles at or past it do not wait)
    int32_t sibling_spin_max = 0;         // polls before a CTA gives up waiting, for good
  };
  struct Params : Base::Params {
    int32_t* sibling_counters = nullptr;
    int32_t sibling_n_tiles = 0;
    int32_t sibling_spin_max = 0;
  };

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape problem_shapes, Arguments const& args,
                                                  void* workspace) {
    Params p;
    static_cast<typename Base::Params&>(p) = Base::to_underlying_arguments(problem_shapes, args, workspace);
    p.sibling_counters = args.sibling_counters;
    p.sibling_n_tiles = args.sibling_n_tiles;
    p.sibling_spin_max = args.sibling_spin_max;
    return p;
  }

  // Producer state (every lane of the producer warp keeps a copy).
  int32_t sync_rows_ = 0;
  int32_t sync_group_ = 0;
  bool sync_gave_up_ = false;

  template <class TensorMaps, class ProblemShapeMNKL>
  CUTLASS_DEVICE void tensormaps_perform_update(TensorMapStorage& shared_tensormaps, Params const& mainloop_params,
                                                TensorMaps const& input_tensormaps,
                                                ProblemShapeMNKL problem_shape_mnkl, int32_t next_batch) {
    Base::tensormaps_perform_update(shared_tensormaps, mainloop_params, input_tensormaps, problem_shape_mnkl,
                                    next_batch);
    sync_rows_ = static_cast<int32_t>(cute::get<0>(problem_shape_mnkl));
    sync_group_ = next_batch;
  }

  template <class Pipeline, class PipeState, class LoadInputs, class TensorMaps, class BlockCoord, class KTileIterator,
            class TensorStorage>
  CUTLASS_DEVICE void load(Params const& mainloop_params, Pipeline pipeline, PipeState smem_pipe_write,
                           LoadInputs const& load_inputs, TensorMaps const& input_tensormaps,
                           BlockCoord const& blk_coord, KTileIterator k_tile_iter, int k_tile_count, int thread_idx,
                           uint32_t block_rank_in_cluster, TensorStorage& shared_tensors) {
    if (k_tile_count > 0) sibling_sync(mainloop_params, cute::get<1>(blk_coord));
    Base::load(mainloop_params, pipeline, smem_pipe_write, load_inputs, input_tensormaps, blk_coord, k_tile_iter,
               k_tile_count, thread_idx, block_rank_in_cluster, shared_tensors);
  }

 private:
  template <class NCoord>
  CUTLASS_DEVICE void sibling_sync(Params const& p, NCoord const& n_coord) {
    if (p.sibling_counters == nullptr || sync_gave_up_) return;
    const int32_t m_tiles = (sync_rows_ + kTileM - 1) / kTileM;
    const int32_t n = static_cast<int32_t>(n_coord);
    if (m_tiles < 2 || n >= p.sibling_n_tiles) return;
    bool gave_up = false;
    if (threadIdx.x % 32 == 0) {
      int32_t* c = p.sibling_counters + static_cast<int64_t>(sync_group_) * p.sibling_n_tiles + n;
      atomicAdd(c, 1);
      for (int32_t polls = 0;; ++polls) {
        int32_t seen;
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(c) : "memory");
        if (seen >= m_tiles) break;
        if (polls >= p.sibling_spin_max) {
          gave_up = true;
          break;
        }
        __nanosleep(128);
      }
    }
    sync_gave_up_ = __shfl_sync(0xffffffffu, gave_up, 0);
  }
};

// Host side: the counters an instance carves from its workspace (kMaxNTiles per group; wider
// problems run without the sync) and the arguments that turn it on.
constexpr int kSiblingMaxNTiles = 256;
constexpr int32_t kSiblingSpinMax = 1024;
// Counters the setup kernel zeroes per group (the N tiles, or none past kSiblingMaxNTiles).
inline int sibling_counters_per_group(int64_t n, int64_t tile_n) {
  const int64_t n_tiles = (n + tile_n - 1) / tile_n;
  return n_tiles > kSiblingMaxNTiles ? 0 : static_cast<int>(n_tiles);
}
template <class MainloopArguments>
void set_sibling_sync(MainloopArguments& a, int32_t* counters, int64_t n, int64_t tile_n) {
  const int n_tiles = sibling_counters_per_group(n, tile_n);
  if (counters == nullptr || n_tiles == 0) return;
  a.sibling_counters = counters;
  a.sibling_n_tiles = n_tiles;
  a.sibling_spin_max = kSiblingSpinMax;
}

}  // namespace fusedmoe::cuda::sm90
