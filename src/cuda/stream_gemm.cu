// Weight-streaming grouped GEMM for small batches per expert (stream_gemm.hpp): the calls that
// took CUTLASS's swap-AB configs (at most 32 expected rows per active expert: Qwen3-30B-A3B /
// DeepSeek-V3 at 8..512 tokens, Mixtral at 8..128), since 2026-11-26 up to 48 rows where k >= 512
// (sm90_use_small_config), and the decode-size
// calls whose small-M kernels would run without the decode fusions (GroupedGemmArgs::small_m_ok).
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
// kTokTile activation rows of the same k range, both in the 128-byte swizzle), one producer warp
// issuing the copies and two consumer warpgroups (64 weight rows each) running wgmma on the
// stages as they are (the weights as the m64 A operand, the tokens as B, N = 8 / 16 / 32 / 64 by
// the expert's rows). The ring runs on across the CTA's weight blocks, so the next block's loads
// overlap this block's last MMAs and stores. Experts with more than kTokTile rows are done
// kTokTile rows at a time (the weights re-read per batch). Grids below the SM count (decode: a few
// experts) spread to one weight block per CTA and run an 8-deep ring at one CTA per SM. 16-bit
// calls and fp8 ones without block scales with 49-64 expected rows per expert take a 128-row token
// tile instead (kWideTokTile: an N = 128 wgmma, 3 stages of 32 KB at two CTAs per SM; wide_tile()),
// so that the experts above 64 rows do not stream their weights twice; 16-bit: the same sums as the
// 64-row tile (tests compare the bits). Above 64 rows, for long weight rows only (stream_tall_tile_ok:
// Mixtral's GEMM2, DeepSeek-V3 TP1's bf16 GEMM1), a 256-row token tile at one CTA per SM
// (kTallTokTile, StreamTile::TALL).
//
// Numerics: bf16 / fp16 products are exact and summed in fp32 in the wgmma's registers across the
// whole k. fp8: each stage's (128 k values) wgmma sums start from zero and are added to fp32
// registers (the tensor cores sum e4m3 products with a short fraction: up to 1.2e-4 of the
// magnitude sum measured at k = 256 on random full-range operands, tests/gpu/test_stream_gemm_gpu.cpp);
// fp8-block (kBlock) adds them times activation scale x weight-block scale (one fmaf), as the small-M
// kernel and CUTLASS's blockwise GEMM promote each k block. The sum order is fixed: deterministic,
// but not the bits of the CUTLASS tile GEMM this replaces. Except on the wide token tile: fp8
// without block scales sums the whole k in the wgmma's registers there, as the CUTLASS
// FP8FastAccum configs it replaces (49-64 rows per expert) do - 64 more accumulators per thread
// would not fit two CTAs per SM, and at one CTA per SM the tile lost to CUTLASS (1.106x on
// Qwen3-30B-A3B at 1024 tokens; bench/results/2026-11-27-h100-stream-wide2: 0.92-0.98x instead).
//
// GEMM1 + activation (stream_gemm1_activation, kAct): the same kernel with GEMM1's weights read
// through a 5-D map whose 128-row stage holds the gate and up rows of 64 outputs, each consumer
// thread ending with both sums of its output; the epilogue stores GEMM2's operand (bf16 / fp16 /
// static fp8). Bit-identical to this GEMM + the activation kernel; layer 0.976-1.009x, geomean
// 0.992 (H200, bench/results/2026-11-26-stream-gemm1-act).
// fp8-block (stream_gemm1_block_activation, kAct && kBlock): the promotion scales per half (the
// gate and up rows of a block lie in different 128-row scale blocks), the activation stored as
// bf16 rows for the 1 x 128 quantise-only pass; the same codes as this GEMM + the activation
// kernel (H100: layer 0.979-0.992x where it applies, bench/results/2026-11-27-h100-stream-block-act).
//
// Rejected first version (v1, bench/results/2026-11-26-h200-stream-gemm/v1-mma-sync): eight
// warps of mma.sync with operands loaded from the stages by ld.shared. At 16+ rows per expert
// fp8 became issue-bound (1.35x the swap-AB config's layer time at 32 rows) and fp8-block paid
// a dependent scale load per tile and stage.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

#include <cute/arch/mma_sm90_gmma.hpp>
#include <cute/arch/mma_sm90_gmma_ext.hpp>

#include "cuda/activation_store.cuh"
#include "cuda/active_expert.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.hpp"
#include "cuda/device_utils.cuh"
#include "cuda/grouped_gemm.hpp"
#include "cuda/mbarrier.cuh"
#include "cuda/smem_opt_in.hpp"
#include "cuda/stream_gemm.hpp"
#include "cuda/tma_map.hpp"
#include "cuda/wgmma_util.cuh"
#include "fusedmoe/error.hpp"

namespace fusedmoe::cuda {
namespace {

constexpr int kBN = 128;                          // weight rows per block (2 warpgroups x 64)
constexpr int kConsumerWarps = kBN / 16;          // two warpgroups
constexpr int kWarps = kConsumerWarps + 1;        // + the producer warp
constexpr int kStageK = 128;                      // bytes of k per stage (the 128-byte swizzle row)
constexpr int kTokTile = 64;                      // activation rows per batch (8 n-tiles of 8)
// The wide token tile: 128 activation rows per batch (an N = 128 wgmma, 64 accumulators per
// thread), for 16-bit / fp8 calls with more than 48 expected rows per expert (wide_tile(), launch()), where a
// 64-row batch would leave many experts with a second batch that streams their weights again.
constexpr int kWideTokTile = 128;
// 3 x 32 KB stages at two CTAs per SM (bf16 / fp16 / fp8 without block scales: 64 accumulators per
// thread, no per-stage promotion), 6 at one CTA per SM for fp8-block (its promotion needs a second
// set of 64: only tests force that tile, the AUTO rules keep fp8-block at 48 rows).
constexpr int kWideStages = 3;
constexpr int kWideBlockStages = 6;
// The tall token tile (StreamTile::TALL, tall_tile()): 256 activation rows per batch, the wgmma's N
// the expert's rows rounded up to 32 (64 .. 256; 128 accumulators per thread), 4 x 48 KB stages at
// one CTA per SM, each stage's wgmmas left in flight while the next stage's are issued. 16-bit
// operands and fp8 without block scales (no promotion set: it would not fit the registers). Measured
// and not kept: a ring sized per CTA (stages of the weight block + only the first batch's token
// boxes, up to 8 in 224 KB: 6 of 36 KB at 150 rows) was slower than these 4 fixed stages on every
// call it took (Mixtral GEMM2 bf16 357-362 -> 386 us; bench/results/2026-11-27-h100-stream-tall/run2).
constexpr int kTallTokTile = 256;
constexpr int kTallStages = 4;
constexpr int kTokBox = 16;                       // activation rows per TMA box
constexpr int64_t kActHalvesMaxBytes = int64_t{32} << 20;  // stream_gemm1_act_applies
constexpr int kStages = 4;      // ring depth with two CTAs per SM
constexpr int kDeepStages = 8;  // with one CTA per SM, for grids of at most one CTA per SM (launch())
constexpr int kWBytes = kBN * kStageK;            // 16 KB
template <int T>
constexpr int stage_bytes() { return kWBytes + T * kStageK; }  // a multiple of 1024: every box 1024-byte aligned
template <int S, int T>
constexpr int smem_bytes() { return S * stage_bytes<T>() + 1024; }  // + alignment slack of the dynamic base
template <int S, int T>
constexpr int ctas_per_sm() { return 2 * smem_bytes<S, T>() <= 220 * 1024 ? 2 : 1; }
// Weight bytes a CTA streams at least (several 128-row blocks when rows are short), so its start
// (expert lookup, barrier set-up, the first copies' latency) is paid over enough work.
constexpr int64_t kTargetCtaBytes = 192 * 1024;
// Diagnostic override for same-binary A/B runs: FUSEDMOE_STREAM_CTA_KB (KB of weights per CTA).
int64_t target_cta_bytes() {
  static const int64_t v = [] {
    const char* e = std::getenv("FUSEDMOE_STREAM_CTA_KB");
    const long long kb = e != nullptr ? std::atoll(e) : 0;
    return kb > 0 ? static_cast<int64_t>(kb) * 1024 : kTargetCtaBytes;
  }();
  return v;
}

// wgmma (D += A x B, both operands in shared memory, K-major, 128-byte swizzle, as the TMA lays
// the stages out): m64 x N x 32 bytes of k (k32 e4m3 or k16 bf16 / fp16), N = 8, 16, 32 or 64
// tokens, d[0 .. N / 2) of each thread. accumulate 0: D = A x B.
#define FMOE_SG_R4 "{%0,%1,%2,%3}"
#define FMOE_SG_R8 "{%0,%1,%2,%3,%4,%5,%6,%7}"
#define FMOE_SG_R16 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}"
#define FMOE_SG_R32                                                                                        \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27," \
  "%28,%29,%30,%31}"
#define FMOE_SG_O4(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
#define FMOE_SG_O8(d) FMOE_SG_O4(d), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
#define FMOE_SG_O16(d) \
  FMOE_SG_O8(d), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define FMOE_SG_O32(d)                                                                                          \
  FMOE_SG_O16(d), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), \
      "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),  \
      "+f"(d[31])
#define FMOE_SG_R64                                                                                          \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27," \
  "%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,"    \
  "%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"
#define FMOE_SG_O64(d)                                                                                          \
  FMOE_SG_O32(d), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), \
      "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]),  \
      "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),  \
      "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),  \
      "+f"(d[63])
// SHAPE: "m64nXkY.f32.T.T"; R / O: the register list and operands of N / 2 floats; A, B, P: the
// operand numbers of the two descriptors and the accumulate flag; TAIL: ", 0, 0" (no transposes)
// for the 16-bit types, empty for e4m3.
#define FMOE_SG_WGMMA(SHAPE, R, O, A, B, P, TAIL)                                                       \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" P ", 0;\nwgmma.mma_async.sync.aligned." SHAPE " " R \
               ", %" A ", %" B ", p, 1, 1" TAIL ";\n}\n"                                               \
               : O(d)                                                                                    \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate))

template <Operand OP, int N, int D>
__device__ __forceinline__ void wgmma_step(float (&d)[D], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  static_assert((N == 8 || N == 16 || N == 32 || N == 64 || N == 128) && N / 2 <= D, "token tile of 8 .. 128");
#define FMOE_SG_TYPES(NS, R, O, A, B, P)                                                   \
  if constexpr (OP == Operand::FP8) FMOE_SG_WGMMA("m64n" NS "k32.f32.e4m3.e4m3", R, O, A, B, P, ""); \
  else if constexpr (OP == Operand::BF16) FMOE_SG_WGMMA("m64n" NS "k16.f32.bf16.bf16", R, O, A, B, P, ", 0, 0"); \
  else FMOE_SG_WGMMA("m64n" NS "k16.f32.f16.f16", R, O, A, B, P, ", 0, 0");
  if constexpr (N == 8) {
    FMOE_SG_TYPES("8", FMOE_SG_R4, FMOE_SG_O4, "4", "5", "6")
  } else if constexpr (N == 16) {
    FMOE_SG_TYPES("16", FMOE_SG_R8, FMOE_SG_O8, "8", "9", "10")
  } else if constexpr (N == 32) {
    FMOE_SG_TYPES("32", FMOE_SG_R16, FMOE_SG_O16, "16", "17", "18")
  } else if constexpr (N == 64) {
    FMOE_SG_TYPES("64", FMOE_SG_R32, FMOE_SG_O32, "32", "33", "34")
  } else {
    FMOE_SG_TYPES("128", FMOE_SG_R64, FMOE_SG_O64, "64", "65", "66")
  }
#undef FMOE_SG_TYPES
}

// One stage (kStageK bytes of k = 4 wgmma k steps of 32 bytes) of a warpgroup: its 64 weight rows
// at sa x the N token rows at sb, into d (accumulate 0: the stage's sums alone).
template <Operand OP, int N, int D>
__device__ __forceinline__ void wgmma_stage(float (&d)[D], uint32_t sa, uint32_t sb, bool accumulate) {
  const uint64_t da = wg::smem_desc(sa), db = wg::smem_desc(sb);
  wg::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kStageK / 32; ++kk)  // a 32-byte k step adds 2 to the descriptor's address field
    wgmma_step<OP, N, D>(d, da + 2 * kk, db + 2 * kk, accumulate || kk > 0 ? 1 : 0);
}

// The tall tile's widths other than 8 .. 128 (96, 160, 192, 224, 256): CUTLASS's (cute) wgmma
// wrappers, which spell out every accumulator operand of each N; always accumulating (D += A x B).
template <Operand OP, int N>
struct TallGmma;
#define FMOE_SG_TALL(N)                                                                                     \
  template <>                                                                                               \
  struct TallGmma<Operand::BF16, N> {                                                                       \
    using Op = cute::SM90::GMMA::MMA_64x##N##x16_F32BF16BF16_SS<cute::SM90::GMMA::Major::K,                 \
                                                                 cute::SM90::GMMA::Major::K>;               \
  };                                                                                                        \
  template <>                                                                                               \
  struct TallGmma<Operand::FP16, N> {                                                                       \
    using Op = cute::SM90::GMMA::MMA_64x##N##x16_F32F16F16_SS<cute::SM90::GMMA::Major::K,                   \
                                                               cute::SM90::GMMA::Major::K>;                 \
  };                                                                                                        \
  template <>                                                                                               \
  struct TallGmma<Operand::FP8, N> {                                                                        \
    using Op = cute::SM90::GMMA::MMA_64x##N##x32_F32E4M3E4M3_SS_TN<>;                                       \
  };
FMOE_SG_TALL(96)
FMOE_SG_TALL(160)
FMOE_SG_TALL(192)
FMOE_SG_TALL(224)
FMOE_SG_TALL(256)
#undef FMOE_SG_TALL

template <class Op, int D, size_t... I>
__device__ __forceinline__ void tall_step(float (&d)[D], uint64_t desc_a, uint64_t desc_b, std::index_sequence<I...>) {
  Op::fma(desc_a, desc_b, d[I]..., cute::SM90::GMMA::ScaleOut::One);
}
template <Operand OP, int N, int D>
__device__ __forceinline__ void tall_wgmma_stage(float (&d)[D], uint32_t sa, uint32_t sb) {
  static_assert(N / 2 <= D, "accumulators");
  const uint64_t da = wg::smem_desc(sa), db = wg::smem_desc(sb);
  wg::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kStageK / 32; ++kk)
    tall_step<typename TallGmma<OP, N>::Op>(d, da + 2 * kk, db + 2 * kk, std::make_index_sequence<N / 2>{});
}

// A whole stage of a warpgroup with the wgmma width nw (8 .. 2 D tokens), waited for.
template <Operand OP, int D>
__device__ __forceinline__ void mma_stage(float (&d)[D], uint32_t sa, uint32_t sb, int nw, bool accumulate) {
  wg::fence_operand(d);
  switch (nw) {
    case 8: wgmma_stage<OP, 8>(d, sa, sb, accumulate); break;
    case 16: wgmma_stage<OP, 16>(d, sa, sb, accumulate); break;
    case 32: wgmma_stage<OP, 32>(d, sa, sb, accumulate); break;
    default:
      if constexpr (D >= 64) {
        if (nw == 128) wgmma_stage<OP, 128>(d, sa, sb, accumulate);
        else wgmma_stage<OP, 64>(d, sa, sb, accumulate);
      } else {
        wgmma_stage<OP, 64>(d, sa, sb, accumulate);
      }
      break;
  }
  wg::wgmma_commit();
  wg::wgmma_wait<0>();
  wg::fence_operand(d);
}

// The tall tile's k loop over one weight block at the wgmma width NW: each stage's wgmmas stay in
// flight while the next stage's are issued, and a stage's slot is released once the wgmmas after
// it were issued and it is done (wait_group 1). NW is a template argument so that no branch lies
// between a stage's wgmmas and the next's: with the width switched per stage inside the loop,
// ptxas serialised every wgmma (C7520, "compiler-inserted WG.AR in divergent path").
template <Operand OP, int NW, int S, int T, int D>
__device__ __forceinline__ void tall_block_mma(float (&acc)[D], uint8_t* smem, uint64_t* full, uint64_t* empty,
                                               int& it, int ksteps, int wgi, int lane) {
  for (int ks = 0; ks < ksteps; ++ks, ++it) {
    const int s = it % S;
    mbar_wait(&full[s], (it / S) & 1);
    const uint32_t st = smem_u32(smem + s * stage_bytes<T>()), sw = st + wgi * 64 * kStageK, sx = st + kWBytes;
    wg::fence_operand(acc);
    if constexpr (NW == 64 || NW == 128) wgmma_stage<OP, NW>(acc, sw, sx, true);
    else tall_wgmma_stage<OP, NW>(acc, sw, sx);
    wg::wgmma_commit();
    if (ks > 0) {
      wg::wgmma_wait<1>();
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[(it - 1) % S]);
    }
  }
  wg::wgmma_wait<0>();
  wg::fence_operand(acc);
  __syncwarp();
  if (lane == 0 && ksteps > 0) mbar_arrive(&empty[(it - 1) % S]);
}

// GEMM1 + activation with its activation rows gathered by token (GroupedGemmArgs::gather_x;
// stream_gemm1_gather_applies): the producer warp copies each stage's token rows from the
// token-major input with cp.async (16-byte chunks into the 128-byte-swizzled places the TMA box
// would fill, eight lanes per row, rows past the expert's end zero-filled up to the box), as
// sm90_gather_a_mainloop.cuh does for the CUTLASS GEMM1. x null: the TMA boxes of the permuted
// operand.
struct StreamGather {
  const uint8_t* x = nullptr;            // [tokens, k] of the operand type, 16-byte aligned
  const int32_t* row_slot = nullptr;     // [rows] slot of each expert-grouped row
  int32_t topk = 1;                      // slot / topk = token
  uint32_t row_bytes = 0;                // k x element bytes; tokens x row_bytes < 2^32
};
constexpr uint32_t kDeadRow = 0xffffffffu;

// A stage's activation boxes for tok token rows, and its transaction bytes (the weight block's
// part plus those boxes): what the stage's full barrier expects (gathered rows: the weight block's
// part only, the rows counted by cp.async arrivals).
__device__ __forceinline__ int tok_boxes(int tok) { return (tok + kTokBox - 1) / kTokBox; }
__device__ __forceinline__ uint32_t stage_tx_bytes(int tok) { return kWBytes + tok_boxes(tok) * kTokBox * kStageK; }

// A stage's expect_tx (bytes: stage_tx_bytes) and its weight copy: k step ks of weight block nb
// of expert e (kAct: the 5-D gate / up map, 64 outputs per block; else the [groups * n, k] map).
template <bool kAct>
__device__ __forceinline__ void load_weight_stage(uint8_t* st, const CUtensorMap* map_b, uint64_t* full,
                                                  uint32_t bytes, int ks, int nb, int e, int n) {
  mbar_expect_tx(full, bytes);
  if constexpr (kAct) tma_load_5d(st, map_b, ks * kStageK, nb * (kBN / 16), e, full);
  else tma_load_2d(st, map_b, ks * kStageK, e * n + nb * kBN, full);
}

// grid: (CTAs per expert, active experts); block: kWarps warps. nb_per_cta weight blocks per CTA.
// kAct (GEMM1 + the gated activation, stream_gemm1_activation): map_b is the 5-D gate / up map
// (act_weight_map) and a weight block is 64 activation outputs: its shared-memory rows 16 w + i
// are the first half's row of output 64 nb + 8 w + i (i < 8), rows 16 w + 8 + i the second
// half's, so a consumer thread's C fragment rows g and g + 8 are the two sums of one output. n
// is the number of outputs (p.N); p is the activation (ActivationRowStore), d is not used.
template <Operand OP, bool kBlock, bool kAct, int S, int T>
__global__ void __launch_bounds__(kWarps * 32, (ctas_per_sm<S, T>()))
    stream_gemm_kernel(const __grid_constant__ CUtensorMap map_b,
                                                                  const __grid_constant__ CUtensorMap map_a,
                                                                  void* __restrict__ d, bool d16, int n, int64_t k_bytes,
                                                                  int groups, const int32_t* __restrict__ offsets,
                                                                  int nb_per_cta, bool early, const float* __restrict__ a_scale,
                                                                  const float* __restrict__ b_scale,
                                                                  const float* __restrict__ d_col_scale,
                                                                  const StreamGather gx,
                                                                  const __grid_constant__ ActivationParams p) {
  // early (GroupedGemmArgs::offsets_final_at_launch): before chain_wait() (chained_launch.cuh) the
  // CTA reads only what is final when it starts - the plan's expert offsets, written at least two
  // chained kernels earlier (through L2: active_expert, __ldcg) - and issues the weight copies of
  // its first ring stages (the weights are the layer's constants); the activation rows, scales and
  // D only after its wait. Every thread waits before it exits or touches the previous kernel's
  // output. Without early (the plan in the kernel right before) it waits first.
  if (!early) chain_wait();
  extern __shared__ uint8_t smem_raw[];
  __shared__ uint64_t full[S], empty[S];
  // kBlock: activation scale x weight-block scale of each token row of the stage's k block,
  // written by the producer warp (it arrives on full[] after its stores). kAct && kBlock: one per
  // half ([h][r]): a weight block's gate rows and up rows lie in different 128-row scale blocks.
  constexpr int kHalves = kAct && kBlock ? 2 : 1;
  __shared__ float stage_scale[kBlock ? S : 1][kHalves][T];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});

  const int e = active_expert<kWarps>(offsets, groups, blockIdx.y);
  if (e < 0) {
    if (early) chain_wait();
    return;
  }
  const int row0 = __ldcg(offsets + e), rows = __ldcg(offsets + e + 1) - row0;
  constexpr int kBlockCols = kAct ? kBN / 2 : kBN;  // outputs (kAct) or D columns per weight block
  const int nblocks = (n + kBlockCols - 1) / kBlockCols;
  const int nb0 = blockIdx.x * nb_per_cta;
  const int nbn = min(nb_per_cta, nblocks - nb0);
  if (nbn <= 0) {
    if (early) chain_wait();
    return;
  }
  const int ksteps = static_cast<int>((k_bytes + kStageK - 1) / kStageK);
  const int batches = (rows + T - 1) / T;
  const int kblocks = static_cast<int>(k_bytes / 128);  // kBlock: fp8, k a multiple of 128

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  // full[s]: the producer's expect_tx arrival (+ kBlock: one per producer lane after its scale
  // stores) and the copies' bytes; empty[s]: one arrival per consumer warp.
  // Gathered rows (gx.x): two arrivals, the expect_tx one (which the early start may make before
  // the rows are copied) and lane 0's after every lane's cp.async arrival, so that no phase
  // completes on the weight bytes alone.
  const bool gather = !kBlock && gx.x != nullptr;
  const uint32_t full_arrivals = kBlock ? 1 + 32 : gather ? 2 : 1;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], full_arrivals);
      mbar_init(&empty[s], kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warp == kConsumerWarps) {  // producer
    // early: the first batch's first stages' weight copies before the wait (each stage's
    // expect_tx declares its activation bytes too, so no stage completes before those land).
    const int pre = early ? min(S, nbn * ksteps) : 0;
    if (early) {
      if (lane == 0) {
        const uint32_t bytes = gather ? static_cast<uint32_t>(kWBytes) : stage_tx_bytes(min(T, rows));
        for (int i = 0; i < pre; ++i) {
          const int nb = nb0 + i / ksteps, ks = i % ksteps;
          load_weight_stage<kAct>(smem + i * stage_bytes<T>(), &map_b, &full[i], bytes, ks, nb, e, n);
        }
      }
      chain_wait();
    }
    if (!kBlock && !gather && lane != 0) return;
    int it = 0;
    for (int tb = 0; tb < batches; ++tb) {
      const int tok = min(T, rows - tb * T);
      const int boxes = tok_boxes(tok);
      const uint32_t bytes = gather ? static_cast<uint32_t>(kWBytes) : stage_tx_bytes(tok);
      // gather: byte offsets in x of the batch's rows lane + 32 i (kDeadRow past the expert's end).
      uint32_t row_off[T / 32];
      if (gather) {
#pragma unroll
        for (int i = 0; i < T / 32; ++i) {
          const int row = tb * T + lane + 32 * i;
          row_off[i] = row < rows ? static_cast<uint32_t>(__ldcg(gx.row_slot + row0 + row) / gx.topk) * gx.row_bytes
                                  : kDeadRow;
        }
      }
      for (int nb = nb0; nb < nb0 + nbn; ++nb)
        for (int ks = 0; ks < ksteps; ++ks, ++it) {
          const int s = it % S;
          // kBlock: the stage's scales (each token row's activation scale, the weight-block
          // scale) are loaded into registers before the wait for the slot, so that their latency
          // overlaps that wait instead of following it (one warp serves every stage): fp8-block
          // layers 0.974-0.998x (H100, bench/results/2026-11-27-h100-stream-fp8-wide).
          float a_pre[kBlock ? T / 32 : 1], sb[kHalves];
          if constexpr (kBlock) {
            // Expert e's activation scales: [k / 128, rows] column-major from row0 * k / 128 on.
            // Weight block scales [groups, weight rows / 128, k / 128]; kAct: block nb's gate rows
            // are weight rows 64 nb .., its up rows n + 64 nb .. (halves, n = N a multiple of 128).
            const float* sa = a_scale + static_cast<int64_t>(row0) * kblocks + static_cast<int64_t>(ks) * rows;
            if constexpr (kAct) {
              const int64_t wblocks = 2 * (n / 128), base = static_cast<int64_t>(e) * wblocks;
              sb[0] = __ldg(b_scale + (base + (64 * nb) / 128) * kblocks + ks);
              sb[kHalves - 1] = __ldg(b_scale + (base + (n + 64 * nb) / 128) * kblocks + ks);
            } else {
              sb[0] = __ldg(b_scale + (static_cast<int64_t>(e) * (n / 128) + nb) * kblocks + ks);
            }
#pragma unroll
            for (int i = 0; i < T / 32; ++i) {
              const int row = tb * T + lane + 32 * i;
              // Through L2 (ld.global.cg), not __ldg: the previous kernel wrote them, and an
              // invariant (non-coherent) load may be moved above the early start's chain_wait().
              a_pre[i] = row < rows ? __ldcg(sa + row) : 0.0f;
            }
          }
          if (it >= S) mbar_wait(&empty[s], ((it / S) - 1) & 1);
          if (gather) {
            // Lane l copies chunk l % 8 of rows l / 8 + 4 q (eight lanes read a row's 128 bytes of
            // this k step); row r's offset is lane r % 32's row_off[r / 32]. Chunks past k read as
            // zeros (source size 0), as the TMA box's.
            const int chunk = lane & 7, row_lane = lane >> 3;
            const uint32_t k_byte = static_cast<uint32_t>(ks) * kStageK + 16u * chunk;
            const uint32_t k_ok = k_byte < static_cast<uint32_t>(k_bytes) ? 16u : 0u;
            const uint32_t dst_a = smem_u32(smem + s * stage_bytes<T>() + kWBytes);
#pragma unroll
            for (int q = 0; q < T / 4; ++q) {
              if (4 * q >= boxes * kTokBox) break;  // warp-uniform
              const int r = row_lane + 4 * q;
              const uint32_t off = __shfl_sync(0xffffffffu, row_off[q / 8], row_lane + 4 * (q % 8));
              const bool live = off != kDeadRow;
              cp_async16(dst_a + r * kStageK + ((chunk ^ (r & 7)) << 4), gx.x + (live ? off + k_byte : 0u),
                         live ? k_ok : 0u);
            }
            cp_async_mbar_arrive(&full[s]);
            __syncwarp();
          }
          if (lane == 0) {
            uint8_t* st = smem + s * stage_bytes<T>();
            if (it >= pre) load_weight_stage<kAct>(st, &map_b, &full[s], bytes, ks, nb, e, n);  // else before the wait
            if (gather) {
              mbar_arrive(&full[s]);  // after every lane's cp.async arrival (__syncwarp above)
            } else {
              for (int bx = 0; bx < boxes; ++bx)
                tma_load_2d(st + kWBytes + bx * kTokBox * kStageK, &map_a, ks * kStageK,
                            row0 + tb * T + bx * kTokBox, &full[s]);
            }
          }
          if constexpr (kBlock) {
#pragma unroll
            for (int i = 0; i < T / 32; ++i) {
#pragma unroll
              for (int h = 0; h < kHalves; ++h) stage_scale[s][h][lane + 32 * i] = a_pre[i] * sb[h];
            }
            mbar_arrive(&full[s]);
          }
        }
    }
    return;
  }

  if (early) chain_wait();
  // Consumers: warpgroup wg multiplies weight rows 64 wg .. 64 wg + 63 of the block; in it, warp
  // w4 holds rows 16 w4 + g and 16 w4 + g + 8 of every 8-token column block j (d[4 j .. 4 j + 3]:
  // tokens 8 j + 2 t, 8 j + 2 t + 1 of row g, then of row g + 8), as mma.sync's C fragment.
  const int wgi = warp >> 2, g = lane >> 2, t = lane & 3, wr = wgi * 64 + (warp & 3) * 16 + g;
  // fp8: the tensor cores sum a stage's e4m3 products with a short fraction (not fp32), so each
  // stage's sums are computed on their own (part) and added to acc in fp32 - the promotion of
  // CUTLASS's default fp8 schedule, which the swap-AB config this replaces used. 16-bit types,
  // and fp8 without block scales on the wide tile (the FP8FastAccum configs' numerics; kWideStages),
  // accumulate in the wgmma's own registers across the stages.
  constexpr bool kPromote = kBlock || (OP == Operand::FP8 && T < kWideTokTile);
  static_assert(!(kBlock && T > kWideTokTile), "the tall token tile has no room for the block promotion");
  // The tall tile keeps one stage's wgmmas in flight while it issues the next stage's (its
  // accumulators are not touched between stages), so the tensor cores do not idle through each
  // stage's wait and barrier round trip at one CTA per SM; the slot is released a stage later.
  constexpr bool kInFlight = T == kTallTokTile;
  // kAct: the activation store's per-CTA constants (the tensor scales, this expert's dequant).
  const ActivationRowStore act_out = kAct ? ActivationRowStore::make(p, e) : ActivationRowStore{};
  float acc[T / 2];
  float part[kPromote ? T / 2 : 1];  // kPromote: one stage's sums
  int it = 0;
  for (int tb = 0; tb < batches; ++tb) {
    const int tok = min(T, rows - tb * T);
    const int nt = (tok + 7) / 8;                                               // 8-token column blocks with rows
    // The wgmma's N: 8, 16, 32, 64, then (wide tile) 128; the tall tile: the rows rounded up to 32,
    // at least 64 (a batch of fewer rows - an expert's last, or a small expert - streams at N = 64).
    const int nw = T == kTallTokTile ? (nt <= 8 ? 64 : 32 * ((nt + 3) / 4))
                   : nt <= 1 ? 8 : nt <= 2 ? 16 : nt <= 4 ? 32 : (T > 64 && nt > 8) ? 128 : 64;
    for (int nb = nb0; nb < nb0 + nbn; ++nb) {
#pragma unroll
      for (int i = 0; i < T / 2; ++i) acc[i] = 0.0f;
      if constexpr (kInFlight) {  // nw >= 64 here (more than 64 rows: the wide tile's range and up)
        switch (nw) {
          case 64: tall_block_mma<OP, 64, S, T>(acc, smem, full, empty, it, ksteps, wgi, lane); break;
          case 96: tall_block_mma<OP, 96, S, T>(acc, smem, full, empty, it, ksteps, wgi, lane); break;
          case 128: tall_block_mma<OP, 128, S, T>(acc, smem, full, empty, it, ksteps, wgi, lane); break;
          case 160: tall_block_mma<OP, 160, S, T>(acc, smem, full, empty, it, ksteps, wgi, lane); break;
          case 192: tall_block_mma<OP, 192, S, T>(acc, smem, full, empty, it, ksteps, wgi, lane); break;
          case 224: tall_block_mma<OP, 224, S, T>(acc, smem, full, empty, it, ksteps, wgi, lane); break;
          default: tall_block_mma<OP, 256, S, T>(acc, smem, full, empty, it, ksteps, wgi, lane); break;
        }
      }
      for (int ks = 0; ks < (kInFlight ? 0 : ksteps); ++ks, ++it) {
        const int s = it % S;
        mbar_wait(&full[s], (it / S) & 1);
        const uint32_t st = smem_u32(smem + s * stage_bytes<T>()), sw = st + wgi * 64 * kStageK, sx = st + kWBytes;
        if constexpr (kPromote) {
          // The stage's sums from zeroed registers (accumulate on), not from the wgmma's
          // accumulate-off first step: with that step ptxas serialised every wgmma of the
          // promoted instances ("insufficient register resources for the wgmma pipeline",
          // C7511). Same sums: the products plus +0.
#pragma unroll
          for (int i = 0; i < T / 2; ++i) part[i] = 0.0f;
          mma_stage<OP>(part, sw, sx, nw, true);
        }
        else mma_stage<OP>(acc, sw, sx, nw, true);
        if constexpr (kPromote && !kBlock) {
#pragma unroll
          for (int j = 0; j < T / 8; ++j) {
            if (j >= nt) break;
#pragma unroll
            for (int v = 0; v < 4; ++v) acc[4 * j + v] += part[4 * j + v];
          }
        }
        if constexpr (kBlock) {
          // Fragment rows g / g + 8 (kAct: the first / second half's rows of the block).
#pragma unroll
          for (int j = 0; j < T / 8; ++j) {
            if (j >= nt) break;
            const float2 sc = *reinterpret_cast<const float2*>(&stage_scale[s][0][8 * j + 2 * t]);
            const float2 sc8 = *reinterpret_cast<const float2*>(&stage_scale[s][kHalves - 1][8 * j + 2 * t]);
            acc[4 * j + 0] = fmaf(part[4 * j + 0], sc.x, acc[4 * j + 0]);
            acc[4 * j + 1] = fmaf(part[4 * j + 1], sc.y, acc[4 * j + 1]);
            acc[4 * j + 2] = fmaf(part[4 * j + 2], sc8.x, acc[4 * j + 2]);
            acc[4 * j + 3] = fmaf(part[4 * j + 3], sc8.y, acc[4 * j + 3]);
          }
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[s]);
      }
      if constexpr (kAct) {
        // This thread's output o: C fragment row g is the first half's sum, row g + 8 the second's.
        // One copy of the store code, rolled over the token columns (acc shifted down by 4 per
        // column): the unrolled 16 stores with every activation inlined made a cold epilogue of
        // thousands of instructions per CTA. The dequant factor (NONE / TENSOR: per expert) and
        // the bias are read once per output, not per store.
        const int64_t o = static_cast<int64_t>(nb) * kBlockCols + warp * 8 + g;
        if (o < n) {
          int64_t gi, ui;
          gate_up_columns(p, o, gi, ui);
          const bool gate_first = p.order == GateUpOrder::GATE_UP;
          const float bg = p.bias ? p.bias[static_cast<int64_t>(e) * p.R + gi] : 0.0f;
          const float bu = p.bias ? p.bias[static_cast<int64_t>(e) * p.R + ui] : 0.0f;
          // fp8-channel (stream_gemm1_channel_activation): the columns' weight scales.
          const bool channel = p.dq.kind == Dequant::CHANNEL;
          const float wg = channel ? p.dq.w[static_cast<int64_t>(e) * p.R + gi] : 1.0f;
          const float wu = channel ? p.dq.w[static_cast<int64_t>(e) * p.R + ui] : 1.0f;
          // The tall tile shifts by kU column blocks at a time (kU copies of the store code), so
          // that its 128 accumulators are not moved once per column block.
          constexpr int kU = T == kTallTokTile ? 4 : 1;
#pragma unroll 1
          for (int j0 = 0; j0 < nt; j0 += kU) {
            float f[kU][4];
#pragma unroll
            for (int u = 0; u < kU; ++u)
#pragma unroll
              for (int v = 0; v < 4; ++v) f[u][v] = acc[4 * u + v];
#pragma unroll
            for (int i = 0; i + 4 * kU < T / 2; ++i) acc[i] = acc[i + 4 * kU];
#pragma unroll
            for (int u = 0; u < kU; ++u) {
              const int j = j0 + u;
#pragma unroll 1
              for (int q = 0; q < 2; ++q) {
                const int r = tb * T + j * 8 + 2 * t + q;
                if (j >= nt || r >= rows) break;
                const float first = q ? f[u][1] : f[u][0], second = q ? f[u][3] : f[u][2];
                const float gv = gate_first ? first : second, uv = gate_first ? second : first;
                if (channel) act_out.store_channel(p, row0 + r, o, gv, uv, bg, bu, wg, wu);
                else act_out.store(p, row0 + r, o, gv, uv, bg, bu);
              }
            }
          }
        }
        continue;
      }
      const int c0 = nb * kBN + wr;
      // The per-channel weight scales of fp8-channel's GEMM2 (GroupedGemmArgs::d_col_scale): this
      // thread's two columns' scales, read once per weight block.
      float wc0 = 1.0f, wc8 = 1.0f;
      if (d_col_scale != nullptr) {
        const float* w_e = d_col_scale + static_cast<int64_t>(e) * n;
        if (c0 < n) wc0 = w_e[c0];
        if (c0 + 8 < n) wc8 = w_e[c0 + 8];
      }
#pragma unroll
      for (int j = 0; j < T / 8; ++j) {
        if (j >= nt) break;
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const int r = tb * T + j * 8 + 2 * t + q;
          if (r < rows) {  // bf16 D (GroupedGemmArgs::d_dtype): the two stores fill a 32-byte sector
            const int64_t i = static_cast<int64_t>(row0 + r) * n + c0;
            const DType dt = d16 ? DType::BF16 : DType::F32;
            const float v0 = __fmul_rn(acc[4 * j + q], wc0), v8 = __fmul_rn(acc[4 * j + 2 + q], wc8);
            if (c0 < n) store_from_float(d, dt, i, v0);
            if (c0 + 8 < n) store_from_float(d, dt, i + 8, v8);
          }
        }
      }
    }
  }
}

// A [rows, row_bytes] byte matrix at p, boxes of box_rows x kStageK bytes, 128-byte swizzle.
CUtensorMap byte_map(const void* p, int64_t rows, int64_t row_bytes, int box_rows) {
  return tma_byte_map(p, rows, row_bytes, kStageK, box_rows, CU_TENSOR_MAP_SWIZZLE_128B, "stream GEMM");
}

// GEMM1's weights [groups, 2N, k] as the gate / up map of the fused activation (the kernel's
// kAct): box (kStageK, 8, 2, 8, 1) = 128 rows, row 16 w + 8 h + i of the box the weight row of
// output 8 w + i of half h (tma_map.hpp).
CUtensorMap act_weight_map(const void* p, int64_t groups, int64_t N, int64_t row_bytes, bool interleaved) {
  return tma_gate_up_map(p, groups, N, row_bytes, kStageK, kBN / 16, interleaved, CU_TENSOR_MAP_SWIZZLE_128B,
                         "stream GEMM1 + activation");
}

// Whether an AUTO launch takes the wide token tile: 16-bit operands and fp8 without block scales
// (stream_wide_tile_ok) with more than kStreamLongKMaxRowsPerGroup expected rows per active expert
// (only those calls come here with more: sm90_use_small_config). At 33-48 rows the 64-row tile at
// two CTAs per SM was as fast or faster (bf16 0.99-1.02x the wide tile's time), and fp8-block lost
// with the wide tile at 49-64 rows (bench/results/2026-11-26-stream-wide-tile,
// bench/results/2026-11-27-h100-stream-fp8-wide).
bool wide_tile(const GroupedGemmArgs& g) {
  const int64_t active = active_groups(g);
  return stream_wide_tile_ok(g) && g.max_rows > kStreamLongKMaxRowsPerGroup * active;
}
// Whether an AUTO launch takes the tall token tile: the calls above the wide tile's 64 expected rows
// per active expert (only stream_tall_tile_ok ones come here with more: sm90_use_small_config).
bool tall_tile(const GroupedGemmArgs& g) {
  const int64_t active = active_groups(g);
  return stream_wide_tile_ok(g) && g.max_rows > kStreamWideMaxRowsPerGroup * active;
}

template <Operand OP, bool kBlock, bool kAct = false>
void launch(const GroupedGemmArgs& g, cudaStream_t stream, StreamTile tile,
            const ActivationParams& p = ActivationParams{}) {
  if (kBlock && tile == StreamTile::TALL)
    throw Error("stream GEMM: the tall token tile takes no block scales (fp8-block runs the 64- or 128-row tile)");
  const int64_t elem = OP == Operand::FP8 ? 1 : 2, k_bytes = g.k * elem;
  const CUtensorMap map_b = kAct ? act_weight_map(g.b, g.groups, p.N, k_bytes, p.interleaved)
                                 : byte_map(g.b, static_cast<int64_t>(g.groups) * g.n, k_bytes, kBN);
  const CUtensorMap map_a = byte_map(g.a, g.max_rows, k_bytes, kTokBox);
  const int64_t cols = kAct ? p.N : g.n, block_cols = kAct ? kBN / 2 : kBN;
  const int nblocks = static_cast<int>((cols + block_cols - 1) / block_cols);
  const int64_t block_bytes = kBN * k_bytes;
  int per = static_cast<int>((target_cta_bytes() + block_bytes - 1) / block_bytes);
  per = per < 1 ? 1 : per > nblocks ? nblocks : per;
  const int64_t active = active_groups(g);
  // Small grids (decode: a few experts): weight blocks spread over up to one CTA per SM, each
  // with the deep ring (one CTA per SM, twice the bytes in flight per CTA).
  const bool small_grid = ((nblocks + per - 1) / per) * active < g.sm_count;
  if (small_grid) {
    const int64_t spread = static_cast<int64_t>(nblocks) * active / (g.sm_count > 0 ? g.sm_count : 1);
    per = static_cast<int>(spread < 1 ? 1 : spread < per ? spread : per);
  }
  const dim3 grid(static_cast<unsigned>((nblocks + per - 1) / per), static_cast<unsigned>(active));
  StreamGather gx;
  if (kAct && !kBlock && g.gather_x != nullptr) {
    gx.x = static_cast<const uint8_t*>(g.gather_x);
    gx.row_slot = g.gather_row_slot;
    gx.topk = g.gather_topk;
    gx.row_bytes = static_cast<uint32_t>(k_bytes);
  }
#define FMOE_SG_LAUNCH(S, T)                                                                                   \
  do {                                                                                                        \
    constexpr auto kernel = stream_gemm_kernel<OP, kBlock, kAct, S, T>;                                       \
    opt_in_dynamic_smem<kernel>(smem_bytes<S, T>());                                                          \
    launch_chained(kernel, grid, dim3(kWarps * 32), smem_bytes<S, T>(), stream, map_b, map_a,                 \
                   g.d, !kAct && g.d_dtype == DType::BF16, static_cast<int>(cols), k_bytes, g.groups,          \
                   g.expert_offsets, per, g.offsets_final_at_launch,                                          \
                   g.a_scale, g.b_scale, g.d_col_scale, gx, p);                                               \
  } while (0)
  if constexpr (!kBlock) {
    if (tile == StreamTile::TALL || (tile == StreamTile::AUTO && tall_tile(g))) {
      FMOE_SG_LAUNCH(kTallStages, kTallTokTile);
      return;
    }
  }
  if (tile == StreamTile::WIDE || (tile == StreamTile::AUTO && wide_tile(g)))
    FMOE_SG_LAUNCH(kBlock ? kWideBlockStages : kWideStages, kWideTokTile);
  else if (small_grid && static_cast<int64_t>(grid.x) * active <= g.sm_count) FMOE_SG_LAUNCH(kDeepStages, kTokTile);
  else FMOE_SG_LAUNCH(kStages, kTokTile);
#undef FMOE_SG_LAUNCH
}

}  // namespace

bool stream_gemm_applies(const GroupedGemmArgs& a, GemmPath path) {
  if (a.max_rows <= 0 || a.groups <= 0 || (a.d_dtype != DType::F32 && a.d_dtype != DType::BF16)) return false;
  if (path == GemmPath::SM90_FP8_BLOCK) {
    if (!small_m_block_scales_ok(a)) return false;  // fp8, n and k multiples of 128, both scale arrays
  } else if (path != GemmPath::SM90_TMA || a.op == Operand::FP32) {
    return false;
  }
  const int64_t elem = a.op == Operand::FP8 ? 1 : 2;
  // TMA: 16-byte aligned bases and row strides; int32 coordinates (rows up to a token batch past
  // max_rows); grid.y = the experts that can have rows.
  const int64_t active = active_groups(a);
  return (a.k * elem) % 16 == 0 && reinterpret_cast<uintptr_t>(a.a) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(a.b) % 16 == 0 && static_cast<int64_t>(a.groups) * a.n < INT32_MAX &&
         a.max_rows < INT32_MAX - kTallTokTile && a.k * elem < INT32_MAX && active <= 65535;
}

// The shape both fused GEMM1 + activation entry points need: gated, R = 2N, whole 8-row groups of
// outputs (the 5-D map's group dimension) that the map's int32 coordinates reach. Halves whose gate
// and up rows lie more than kActHalvesMaxBytes apart stay unfused: each CTA then streams two
// regions that far apart, and Mixtral-8x7B's (59 MB fp8, 117 MB bf16) measured GEMM1 + activation
// 1.05 / 1.10x the unfused pair's layer time at 2 tokens (H200,
// bench/results/2026-11-26-decode-stream/final; DeepSeek-V3 TP1's 29 MB bf16: 0.99-1.00x). Except
// on the wide token tile (49-64 rows per expert: each CTA's two regions are read for longer):
// Mixtral bf16 at 256 tokens 0.975x fused (H100, bench/results/2026-11-27-h100-stream-fp8-wide).
static bool gated_act_shape_ok(const GroupedGemmArgs& g1, const ActivationParams& p) {
  const int64_t row_bytes = g1.k * (g1.op == Operand::FP8 ? 1 : 2);
  if (!p.interleaved && p.N * row_bytes > kActHalvesMaxBytes && !wide_tile(g1)) return false;
  return p.act != Activation::RELU2 && p.R == 2 * p.N && g1.n == p.R && p.N % 8 == 0 && p.N / 8 < (int64_t{1} << 31);
}

bool stream_gemm1_act_applies(const GroupedGemmArgs& g1, GemmPath path, const ActivationParams& p) {
  if (path != GemmPath::SM90_TMA || !stream_gemm_takes(g1, path) || g1.op != p.op) return false;
  // bf16 / fp16 conversion or static fp8; the dequant the store applies per row (NONE / TENSOR).
  const bool quant_ok = p.quant == Fp8Quant::NONE ? (p.op == Operand::BF16 || p.op == Operand::FP16)
                                                  : (p.quant == Fp8Quant::TENSOR_STATIC && p.op == Operand::FP8);
  return quant_ok && (p.dq.kind == Dequant::NONE || p.dq.kind == Dequant::TENSOR) && gated_act_shape_ok(g1, p);
}

namespace {
// The fp8 GEMM1 + activation launches that write the activation as bf16 rows [rows, N] (h's
// buffer) for the quantise-only pass that makes GEMM2's operand (fp8-block: kBlock, 1 x 128
// groups; fp8-channel: per row), once their rules held; counted as that fused kind.
template <bool kBlock>
void launch_bf16_rows(const GroupedGemmArgs& g1, const ActivationParams& p, void* act_bf16, cudaStream_t stream,
                      StreamTile tile, FusedGemm1 kind, const char* format) {
  if (act_bf16 == nullptr) throw Error(std::string("stream GEMM1 + activation (") + format + "): act_bf16 is null");
  count_fused_gemm1_launch(kind);
  launch<Operand::FP8, kBlock, true>(g1, stream, tile, bf16_rows_output(p, act_bf16));
}
}  // namespace

bool stream_gemm1_block_act_applies(const GroupedGemmArgs& g1, GemmPath path, const ActivationParams& p) {
  if (path != GemmPath::SM90_FP8_BLOCK || !stream_gemm_takes(g1, path) || g1.op != Operand::FP8) return false;
  // Halves only, N a multiple of 128 (a block's gate and up rows each inside one 128-row scale
  // block; the 1 x 128 quantiser of the rows needs it too), bf16 rows out, no dequant outside the
  // mainloop.
  return !p.interleaved && p.N % 128 == 0 && p.quant == Fp8Quant::BLOCK && p.act_dtype == DType::BF16 &&
         p.dq.kind == Dequant::NONE && gated_act_shape_ok(g1, p);
}

void stream_gemm1_block_activation(const GroupedGemmArgs& g1, const ActivationParams& p, void* act_bf16,
                                   cudaStream_t stream, StreamTile tile) {
  if (!stream_gemm1_block_act_applies(g1, GemmPath::SM90_FP8_BLOCK, p))
    throw Error("stream GEMM1 + activation (fp8-block): called for a problem it does not take "
                "(stream_gemm1_block_act_applies: gated activation in halves, R = 2N with N a multiple of 128, "
                "1 x 128 quantisation of bf16 rows; N = " + std::to_string(p.N) + ", R = " + std::to_string(p.R) + ")");
  if (g1.gather_x != nullptr) throw Error("stream GEMM1 + activation (fp8-block): gathered rows are not taken");
  launch_bf16_rows<true>(g1, p, act_bf16, stream, tile, FusedGemm1::FP8_BLOCK, "fp8-block");
}

bool stream_gemm1_channel_act_applies(const GroupedGemmArgs& g1, GemmPath path, const ActivationParams& p) {
  if (path != GemmPath::SM90_TMA || !stream_gemm_takes(g1, path) || g1.op != Operand::FP8 || p.op != Operand::FP8)
    return false;
  // Per-channel dequant (row activation scale x column weight scale), bf16 rows out for the per-row
  // fp8 quantise-only pass (8-wide vectors: N a multiple of 8, which gated_act_shape_ok asks too).
  return p.dq.kind == Dequant::CHANNEL && p.quant == Fp8Quant::ROW && p.act_dtype == DType::BF16 &&
         gated_act_shape_ok(g1, p);
}

void stream_gemm1_channel_activation(const GroupedGemmArgs& g1, const ActivationParams& p, void* act_bf16,
                                     cudaStream_t stream, StreamTile tile) {
  if (!stream_gemm1_channel_act_applies(g1, GemmPath::SM90_TMA, p))
    throw Error("stream GEMM1 + activation (fp8-channel): called for a problem it does not take "
                "(stream_gemm1_channel_act_applies: fp8 operands, per-channel dequant, per-row fp8 quantisation of "
                "bf16 rows, gated activation with R = 2N and N a multiple of 8; N = " + std::to_string(p.N) +
                ", R = " + std::to_string(p.R) + ")");
  if (g1.gather_x != nullptr) count_gathered_gemm1_launch();
  launch_bf16_rows<false>(g1, p, act_bf16, stream, tile, FusedGemm1::FP8_CHANNEL, "fp8-channel");
}

bool stream_gemm1_gather_applies(const GroupedGemmArgs& g1, GemmPath path, const ActivationParams& p, const void* x,
                                 int64_t tokens) {
  const Gemm1Gather mode = gemm1_gather_mode();
  if (mode == Gemm1Gather::OFF || (g1.op != Operand::BF16 && g1.op != Operand::FP8)) return false;
  if (!(stream_gemm1_act_applies(g1, path, p) || stream_gemm1_channel_act_applies(g1, path, p))) return false;
  const int64_t row_bytes = g1.k * (g1.op == Operand::FP8 ? 1 : 2);
  if (x == nullptr || reinterpret_cast<uintptr_t>(x) % 16 != 0 || row_bytes % 16 != 0 || tokens <= 0 ||
      tokens * row_bytes > (int64_t{1} << 32))
    return false;
  if (mode == Gemm1Gather::ON) return true;
  // AUTO: the 64-row token tile (at most 48 expected rows per expert: wide_tile() false) from 256
  // tokens up. Same-binary A/B with the gather forced on, H100
  // (bench/results/2026-11-27-h100-stream-gather/forced): DeepSeek-V3 TP8 at 1024 tokens 0.935
  // (bf16) / 0.954 (fp8-tensor, fp8-channel) - the permute writes no slot rows and GEMM1 reads a
  // compact x instead (663 -> 637 us bf16) - at 256 tokens 0.973-0.982; DeepSeek-V3 TP1 0.992-0.998;
  // Qwen3-30B-A3B 256 tokens 0.976-0.995. On the wide tile (49-64 rows per expert) it lost:
  // Mixtral-8x7B 256 tokens 1.011-1.037, Qwen3-30B-A3B fp8 1024 tokens 1.022 (bf16 0.982).
  // Smaller batches were not measured.
  constexpr int64_t kStreamGatherMinTokens = 256;
  return !wide_tile(g1) && tokens >= kStreamGatherMinTokens;
}

void stream_gemm1_activation(const GroupedGemmArgs& g1, const ActivationParams& p, cudaStream_t stream,
                             StreamTile tile) {
  if (!stream_gemm1_act_applies(g1, GemmPath::SM90_TMA, p))
    throw Error("stream GEMM1 + activation: called for a problem it does not take (stream_gemm1_act_applies: gated "
                "activation, R = 2N with N a multiple of 8, bf16 / fp16 conversion or static fp8; N = " +
                std::to_string(p.N) + ", R = " + std::to_string(p.R) + ")");
  if (g1.gather_x != nullptr) {
    if (g1.op == Operand::FP16)
      throw Error("stream GEMM1 + activation: gathered rows are bf16 or fp8 (stream_gemm1_gather_applies)");
    count_gathered_gemm1_launch();
  }
  switch (g1.op) {
    case Operand::BF16: return launch<Operand::BF16, false, true>(g1, stream, tile, p);
    case Operand::FP16: return launch<Operand::FP16, false, true>(g1, stream, tile, p);
    default: return launch<Operand::FP8, false, true>(g1, stream, tile, p);
  }
}

void stream_grouped_gemm(const GroupedGemmArgs& g, GemmPath path, cudaStream_t stream, StreamTile tile) {
  if (g.gather_x != nullptr) throw Error("stream GEMM: gathered rows are taken by GEMM1 + activation only");
  if (!stream_gemm_applies(g, path))
    throw Error("stream GEMM: called for a problem it does not take (fp32 or bf16 D, bf16 / fp16 / fp8 operands with "
                "16-byte aligned rows and bases; fp8-block also n, k multiples of 128 and both scale arrays; n = " +
                std::to_string(g.n) + ", k = " + std::to_string(g.k) + ")");
  if (path == GemmPath::SM90_FP8_BLOCK) return launch<Operand::FP8, true>(g, stream, tile);
  switch (g.op) {
    case Operand::BF16: return launch<Operand::BF16, false>(g, stream, tile);
    case Operand::FP16: return launch<Operand::FP16, false>(g, stream, tile);
    default: return launch<Operand::FP8, false>(g, stream, tile);
  }
}

}  // namespace fusedmoe::cuda
