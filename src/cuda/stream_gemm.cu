// Weight-streaming grouped GEMM for small batches per expert (stream_gemm.hpp): the calls that
// took CUTLASS's swap-AB configs (at most kSmallConfigMaxRowsPerGroup expected rows per active
// expert: Qwen3-30B-A3B / DeepSeek-V3 TP8 at 8..512 tokens).
//
// Why not the CUTLASS swap-AB tile GEMM there: those calls only stream weights (a few tokens per
// expert against megabytes of weights) and measured 2.3-2.4 TB/s of the H100's 3.05 (H100,
// efc3aea grid: Qwen3 fp8 M = 64 GEMM1 162 us for 396 MB). A ptr-array grouped GEMM rewrites
// its TMA descriptors whenever a CTA moves to another expert's tile - with 128+ experts almost
// every tile - and each tile fills and drains its pipeline around a short mainloop.
//
// Here the TMA descriptors are two plain 2-D maps made on the host per call (all experts' weights
// as one [groups * n, k] byte matrix; the activations as [rows, k]), so nothing is rewritten on
// the device. A CTA owns one expert and a run of 128-row weight blocks of it and streams them
// through a ring of kStages shared-memory stages (128 weight rows x 128 bytes of k, and up to
// kTokTile activation rows of the same k range), one producer warp issuing the copies, eight
// consumer warps (16 weight rows each) multiplying with mma.sync (m16n8k16 bf16 / fp16,
// m16n8k32 e4m3) straight from the 128-byte-swizzled stages. The ring runs on across the CTA's
// weight blocks, so the next block's loads overlap this block's last MMAs and stores. Experts
// with more than kTokTile rows are done kTokTile rows at a time (the weights re-read per batch).
//
// Numerics: fp32 accumulation of exact products (bf16 x bf16, fp16 x fp16, e4m3 x e4m3 are exact
// in fp32), the sum order the MMA's, fixed: deterministic, but not the bits of the CUTLASS tile
// GEMM. fp8-block (kBlock): each 128-wide k block's MMA sums start from zero and are added to the
// accumulator times activation scale x weight-block scale (one fmaf), as the small-M kernel does.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <string>

#include "cuda/active_expert.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.hpp"
#include "cuda/grouped_gemm.hpp"
#include "cuda/small_m_mma.cuh"
#include "cuda/smem_opt_in.hpp"
#include "cuda/stream_gemm.hpp"
#include "fusedmoe/error.hpp"

namespace fusedmoe::cuda {
namespace {

constexpr int kBN = 128;                          // weight rows per block (8 warps x 16)
constexpr int kConsumerWarps = kBN / 16;
constexpr int kWarps = kConsumerWarps + 1;        // + the producer warp
constexpr int kStageK = 128;                      // bytes of k per stage (the 128-byte swizzle row)
constexpr int kTokTile = 64;                      // activation rows per batch (8 n-tiles of 8)
constexpr int kTokBox = 16;                       // activation rows per TMA box
constexpr int kStages = 4;
constexpr int kWBytes = kBN * kStageK;            // 16 KB
constexpr int kXBytes = kTokTile * kStageK;       // 8 KB
constexpr int kStageBytes = kWBytes + kXBytes;    // a multiple of 1024: every box 1024-byte aligned
constexpr int kSmemBytes = kStages * kStageBytes + 1024;  // + alignment slack of the dynamic base
// Weight bytes a CTA streams at least (several 128-row blocks when rows are short), so its start
// (expert lookup, barrier set-up, the first copies' latency) is paid over enough work.
constexpr int64_t kTargetCtaBytes = 192 * 1024;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT_%=;\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}
// One 2-D box (x: byte offset along k, y: row) into shared memory, completing on bar.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int x, int y, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(smem_u32(bar))
      : "memory");
}
// 16 bytes of a 128-byte-swizzled tile: chunk c (0..7) of row r sits at chunk c ^ (r % 8).
// (asm volatile: the stage is written by the TMA, which the compiler cannot see.)
__device__ __forceinline__ uint4 lds_swz(uint32_t tile, int r, int c) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(tile + r * kStageK + ((c ^ (r & 7)) << 4)));
  return v;
}

// grid: (CTAs per expert, active experts); block: kWarps warps. nb_per_cta weight blocks per CTA.
template <Operand OP, bool kBlock>
__global__ void __launch_bounds__(kWarps * 32, 2) stream_gemm_kernel(const __grid_constant__ CUtensorMap map_b,
                                                                  const __grid_constant__ CUtensorMap map_a,
                                                                  float* __restrict__ d, int n, int64_t k_bytes,
                                                                  int groups, const int32_t* __restrict__ offsets,
                                                                  int nb_per_cta, const float* __restrict__ a_scale,
                                                                  const float* __restrict__ b_scale) {
  chain_wait();
  extern __shared__ uint8_t smem_raw[];
  __shared__ uint64_t full[kStages], empty[kStages];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});

  const int e = active_expert<kWarps>(offsets, groups, blockIdx.y);
  if (e < 0) return;
  const int row0 = __ldg(offsets + e), rows = __ldg(offsets + e + 1) - row0;
  const int nblocks = (n + kBN - 1) / kBN;
  const int nb0 = blockIdx.x * nb_per_cta;
  const int nbn = min(nb_per_cta, nblocks - nb0);
  if (nbn <= 0) return;
  const int ksteps = static_cast<int>((k_bytes + kStageK - 1) / kStageK);
  const int batches = (rows + kTokTile - 1) / kTokTile;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warp == kConsumerWarps) {  // producer
    if (lane != 0) return;
    int it = 0;
    for (int tb = 0; tb < batches; ++tb) {
      const int tok = min(kTokTile, rows - tb * kTokTile);
      const int boxes = (tok + kTokBox - 1) / kTokBox;
      const uint32_t bytes = kWBytes + boxes * kTokBox * kStageK;
      for (int nb = nb0; nb < nb0 + nbn; ++nb)
        for (int ks = 0; ks < ksteps; ++ks, ++it) {
          const int s = it % kStages;
          if (it >= kStages) mbar_wait(&empty[s], ((it / kStages) - 1) & 1);
          uint8_t* st = smem + s * kStageBytes;
          mbar_expect_tx(&full[s], bytes);
          tma_load_2d(st, &map_b, ks * kStageK, e * n + nb * kBN, &full[s]);
          for (int bx = 0; bx < boxes; ++bx)
            tma_load_2d(st + kWBytes + bx * kTokBox * kStageK, &map_a, ks * kStageK, row0 + tb * kTokTile + bx * kTokBox,
                        &full[s]);
        }
    }
    return;
  }

  // Consumers: warp w multiplies weight rows 16 w .. 16 w + 15 of the block.
  const int g = lane >> 2, t = lane & 3, wr = warp * 16 + g;
  const int kblocks = static_cast<int>(k_bytes / 128);  // kBlock: fp8, k a multiple of 128
  float acc[kTokTile / 8][4];
  int it = 0;
  for (int tb = 0; tb < batches; ++tb) {
    const int tok = min(kTokTile, rows - tb * kTokTile);
    const int nt = (tok + 7) / 8;
    for (int nb = nb0; nb < nb0 + nbn; ++nb) {
#pragma unroll
      for (int i = 0; i < kTokTile / 8; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
      for (int ks = 0; ks < ksteps; ++ks, ++it) {
        const int s = it % kStages;
        // kBlock: the weight block's scale of this k block and where its activation scales start
        // (the rows of expert e: [k / 128, rows] column-major from row0 * k / 128 on).
        float sb = 0.0f;
        const float* sa = nullptr;
        if constexpr (kBlock) {
          sb = __ldg(b_scale + (static_cast<int64_t>(e) * (n / 128) + nb) * kblocks + ks);
          sa = a_scale + static_cast<int64_t>(row0) * kblocks + static_cast<int64_t>(ks) * rows;
        }
        mbar_wait(&full[s], (it / kStages) & 1);
        const uint32_t sw = smem_u32(smem + s * kStageBytes), sx = sw + kWBytes;
        constexpr int kKB = kStageK / small_m::kKBlockBytes;  // 64-byte k blocks per stage
        uint4 w_lo[kKB], w_hi[kKB];
#pragma unroll
        for (int j = 0; j < kKB; ++j) {
          w_lo[j] = lds_swz(sw, wr, 4 * j + t);
          w_hi[j] = lds_swz(sw, wr + 8, 4 * j + t);
        }
        // One n-tile at a time (kBlock: its block sums promoted at once, so only one tile of
        // partial sums is live).
#pragma unroll
        for (int i = 0; i < kTokTile / 8; ++i)
          if (i < nt) {
            float part[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sc[2] = {0.0f, 0.0f};
            if constexpr (kBlock) {
#pragma unroll
              for (int q = 0; q < 2; ++q) {
                const int r = tb * kTokTile + i * 8 + 2 * t + q;
                if (r < rows) sc[q] = __ldg(sa + r) * sb;
              }
            }
#pragma unroll
            for (int j = 0; j < kKB; ++j) {
              const uint4 x = lds_swz(sx, i * 8 + g, 4 * j + t);
              if constexpr (kBlock) small_m::mma_kblock<OP>(part, w_lo[j], w_hi[j], x);
              else small_m::mma_kblock<OP>(acc[i], w_lo[j], w_hi[j], x);
            }
            if constexpr (kBlock) {
#pragma unroll
              for (int v = 0; v < 4; ++v) acc[i][v] = fmaf(part[v], sc[v & 1], acc[i][v]);
            }
          }
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[s]);
      }
      // acc[i]: weight rows wr (values 0, 1) and wr + 8 (2, 3) x tokens 8 i + 2 t (+1) of this batch.
      const int c0 = nb * kBN + wr;
#pragma unroll
      for (int i = 0; i < kTokTile / 8; ++i) {
        if (i >= nt) break;
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const int r = tb * kTokTile + i * 8 + 2 * t + q;
          if (r < rows) {
            float* drow = d + static_cast<int64_t>(row0 + r) * n;
            if (c0 < n) drow[c0] = acc[i][q];
            if (c0 + 8 < n) drow[c0 + 8] = acc[i][2 + q];
          }
        }
      }
    }
  }
}

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  });
  if (fn == nullptr) throw Error("stream GEMM: the driver has no cuTensorMapEncodeTiled (CUDA 12+ driver needed)");
  return fn;
}

// A [rows, row_bytes] byte matrix at p, boxes of box_rows x kStageK bytes, 128-byte swizzle, zeros
// past either extent.
CUtensorMap byte_map(const void* p, int64_t rows, int64_t row_bytes, int box_rows) {
  CUtensorMap m{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(row_bytes), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_bytes)};
  const cuuint32_t box[2] = {kStageK, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode_fn()(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(p), dims, strides, box,
                                 elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error("stream GEMM: cuTensorMapEncodeTiled failed (" + std::to_string(static_cast<int>(r)) + ") for a " +
                std::to_string(rows) + " x " + std::to_string(row_bytes) + "-byte matrix");
  return m;
}

template <Operand OP, bool kBlock>
void launch(const GroupedGemmArgs& g, cudaStream_t stream) {
  const int64_t elem = OP == Operand::FP8 ? 1 : 2, k_bytes = g.k * elem;
  const CUtensorMap map_b = byte_map(g.b, static_cast<int64_t>(g.groups) * g.n, k_bytes, kBN);
  const CUtensorMap map_a = byte_map(g.a, g.max_rows, k_bytes, kTokBox);
  const int nblocks = static_cast<int>((g.n + kBN - 1) / kBN);
  const int64_t block_bytes = kBN * k_bytes;
  int per = static_cast<int>((kTargetCtaBytes + block_bytes - 1) / block_bytes);
  per = per < 1 ? 1 : per > nblocks ? nblocks : per;
  const int64_t active = g.max_rows < g.groups ? g.max_rows : g.groups;
  const dim3 grid(static_cast<unsigned>((nblocks + per - 1) / per), static_cast<unsigned>(active));
  constexpr auto kernel = stream_gemm_kernel<OP, kBlock>;
  opt_in_dynamic_smem<kernel>(kSmemBytes);
  launch_chained(kernel, grid, dim3(kWarps * 32), kSmemBytes, stream, map_b, map_a, static_cast<float*>(g.d),
                 static_cast<int>(g.n), k_bytes, g.groups, g.expert_offsets, per, g.a_scale, g.b_scale);
}

}  // namespace

bool stream_gemm_applies(const GroupedGemmArgs& a, GemmPath path) {
  if (a.max_rows <= 0 || a.groups <= 0 || a.d_dtype != DType::F32) return false;
  if (path == GemmPath::SM90_FP8_BLOCK) {
    if (a.op != Operand::FP8 || a.n % 128 != 0 || a.k % 128 != 0 || a.a_scale == nullptr || a.b_scale == nullptr)
      return false;
  } else if (path != GemmPath::SM90_TMA || a.op == Operand::FP32) {
    return false;
  }
  const int64_t elem = a.op == Operand::FP8 ? 1 : 2;
  // TMA: 16-byte aligned bases and row strides; int32 coordinates.
  return (a.k * elem) % 16 == 0 && reinterpret_cast<uintptr_t>(a.a) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(a.b) % 16 == 0 && static_cast<int64_t>(a.groups) * a.n < INT32_MAX &&
         a.max_rows < INT32_MAX && a.k * elem < INT32_MAX;
}

void stream_grouped_gemm(const GroupedGemmArgs& g, GemmPath path, cudaStream_t stream) {
  if (!stream_gemm_applies(g, path))
    throw Error("stream GEMM: called for a problem it does not take (fp32 D, bf16 / fp16 / fp8 operands with "
                "16-byte aligned rows and bases; fp8-block also n, k multiples of 128 and both scale arrays; n = " +
                std::to_string(g.n) + ", k = " + std::to_string(g.k) + ")");
  if (path == GemmPath::SM90_FP8_BLOCK) return launch<Operand::FP8, true>(g, stream);
  switch (g.op) {
    case Operand::BF16: return launch<Operand::BF16, false>(g, stream);
    case Operand::FP16: return launch<Operand::FP16, false>(g, stream);
    default: return launch<Operand::FP8, false>(g, stream);
  }
}

}  // namespace fusedmoe::cuda
