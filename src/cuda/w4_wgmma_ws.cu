// 4-bit weight grouped GEMM on Hopper's wgmma, warp-specialised (MXFP4 / NVFP4 weights, bf16
// operand, fp32 D): the decode runs on its own warpgroups and writes the bf16 weight tile to
// shared memory, and the MMA warpgroups issue wgmmas with both operands in shared memory. The
// same tile, k order, numerics and output as w4_wgmma.cu's kernel (the register-sourced form,
// where every warp decodes its A fragments between its wgmmas): every e2m1 x block-scale product
// is an exact bf16 value, the products of a k16 step are summed by the tensor cores in fp32, the
// same wgmma shapes in the same order, so D is bitwise that kernel's (tests/gpu/test_w4_wgmma_gpu.cpp).
//
// Why: that kernel is bound by issue and latency, not by a unit (ncu at 4096 tokens: issue 41%,
// tensor pipe 45-53%, 185-199 instructions per 64-k stage and warp, ~96 of them the decode): its
// wgmmas wait for the slowest warp's decode of each k16 step, and the copies, barriers and decode
// share the same 8 warps. Here (as w4a8_wgmma.cu) the copies and the decode of stage s + 1 run
// beside the wgmmas of stage s.
//
// Tile: a CTA owns 128 weight rows and up to 256 tokens of one expert (the two 128-token halves
// of wgmma N = 32 / 64 / 128, as w4_wgmma.cu). Four warpgroups:
//   producers (0, 1; kProducerRegs): cp.async copies of stage s + kStages - 1 (the activation
//     tile in the 128-byte swizzle wgmma reads, the packed weight rows), then the decode of stage
//     s: thread pt owns the even (pt < 128) or odd packed words of weight row pt % 128 and writes
//     the bf16 values of its four 16-byte A chunks (k16 step j, columns 0..7 or 8..15) in the
//     same swizzle: chunk 2j + hf of the row = codes j and j + 4 of words hf, hf + 2, hf + 4,
//     hf + 6 (the register fragment's order in w4_wgmma.cu, so the activations' k order,
//     KOrder::W4_WGMMA, is unchanged).
//   consumers (2, 3; kConsumerRegs; 64 weight rows each): per stage four k16 wgmma steps per
//     half, then the previous stage released (wgmma groups: one in flight across stages).
// Hand-off by named barriers per ring slot (full: producers arrive, consumers wait; empty: the
// reverse), as w4a8_wgmma.cu.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "cuda/chained_launch.cuh"
#include "cuda/mbarrier.cuh"
#include "cuda/smem_opt_in.hpp"
#include "cuda/w4_decode.cuh"
#include "cuda/w4_gemm.hpp"
#include "cuda/wgmma_util.cuh"
#include "fusedmoe/error.hpp"

namespace fusedmoe::cuda {
namespace {

using namespace w4;
using namespace wg;

constexpr int kProducers = 256;             // two producer warpgroups
constexpr int kThreads = kProducers + 256;  // + two consumer warpgroups
constexpr int kRowsPerCta = 128;            // weight rows (64 per consumer warpgroup)
constexpr int kBK = 64;                     // k per stage: one 128-byte swizzle row of bf16
constexpr int TM = 256;                     // tokens per CTA tile: two halves of up to 128 (wgmma N)
constexpr int kStages = 4;
constexpr int kBBytes = TM * 128;           // activation tile of a stage (two 16 KB halves)
constexpr int kABytes = kRowsPerCta * 128;  // decoded weight tile (two 8 KB warpgroup halves)
// The packed weights have their own, deeper ring: they come from DRAM (each byte once per token
// tile) while the activation tile is mostly an L2 hit (every CTA of a token tile reads it).
constexpr int kWStages = 8;
constexpr int kWBytes = kRowsPerCta * 32;  // packed rows of a stage: 32 bytes, halves swapped on rows 4..7 mod 8 (bank-conflict-free 16-byte loads)
constexpr int kAOff = kStages * kBBytes, kWOff = kAOff + kStages * kABytes, kLutOff = kWOff + kWStages * kWBytes;
static_assert(kBBytes % 1024 == 0 && kABytes % 1024 == 0, "swizzled tiles must be 1024-aligned");
constexpr int kLutBytes = 256 * 4;  // scale code -> bf16x2 multiplier (scale_bits)
constexpr int kSmem = kLutOff + kLutBytes + 1024;       // + alignment slack
constexpr int kProducerRegs = 80, kConsumerRegs = 168;  // 256 x 80 + 256 x 168 <= 64 K
constexpr int kBarProducer = 1, kBarConsumer = 2, kBarFull = 3, kBarEmpty = 3 + kStages;  // named barrier ids (0: __syncthreads)
static_assert(kBarEmpty + kStages <= 16, "16 named barriers");
constexpr int kDPitch = kRowsPerCta + 4;  // the staged fp32 tile's row (floats), as w4_wgmma.cu
static_assert(TM * kDPitch * 4 <= kWOff, "the staged D tile fits the activation and decoded rings");

struct Params {
  const uint8_t* w;
  const void* scale;
  const uint16_t* a;
  float* d;
  int64_t n, k;
  int groups;
  const int32_t* offsets;
  bool swizzled;
  uint32_t place0 = 0x1040u, place1 = 0x104u;  // e2m1_pair's multipliers (kernel parameters: w4_wgmma.cu says why)
  int diag = 0;  // DIAGNOSTIC ONLY (FUSEDMOE_W4_DIAG): bit 0 skips the activation copies, bit 1 the weight copies
  bool d_bulk = false;                          // the bulk row copies of D (n % 4 == 0, 16-byte aligned d)
};

struct Tile {
  int e;
  int64_t row0;   // first activation row of the tile
  int rows;       // tokens in the tile (<= TM)
  int64_t n0;     // first weight row of the CTA
  int nk;         // stages (k / 64)
  uint32_t smem;  // shared address of slot 0 (1024-aligned)
};

__device__ __forceinline__ void bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}
template <int R>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(R));
}
template <int R>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(R));
}

// D[64 x 128] += A[64 x 16] x B[16 x 128], both bf16 in shared memory (K-major, 128-byte swizzle): d[0 .. 64).
__device__ __forceinline__ void wgmma_ss_n128(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}

// D[64 x 64] += A[64 x 16] x B[16 x 64], both bf16 in shared memory (K-major, 128-byte swizzle): d[0 .. 32).
__device__ __forceinline__ void wgmma_ss_n64(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}

// D[64 x 32] += A[64 x 16] x B[16 x 32], both bf16 in shared memory (K-major, 128-byte swizzle): d[0 .. 16).
__device__ __forceinline__ void wgmma_ss_n32(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}

template <int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
  if constexpr (N == 128) wgmma_ss_n128(d, desc_a, desc_b);
  else if constexpr (N == 64) wgmma_ss_n64(d, desc_a, desc_b);
  else wgmma_ss_n32(d, desc_a, desc_b);
}
template <int V>
using IntC = std::integral_constant<int, V>;
__device__ __forceinline__ int half_n(int rows) { return rows > 64 ? 128 : (rows > 32 ? 64 : 32); }

// Codes j and j + 4 of `word` -> bf16x2 bits of value x 2^-126 (code j in the low half): w4_wgmma.cu's
// e2m1_nibble_pair (mask, multiply, mask; sh = word >> 8 holds codes 2, 3 / 6, 7 where 0, 1 / 4, 5 were).
__device__ __forceinline__ uint32_t e2m1_pair(int j, uint32_t word, uint32_t sh, uint32_t place0, uint32_t place1) {
  const uint32_t x = j < 2 ? word : sh;
  return j % 2 == 0 ? ((x & 0x000F000Fu) * place0) & 0x81C081C0u : ((x & 0x00F000F0u) * place1) & 0x81C081C0u;
}

// Warpgroups 0 and 1: copies and decode (see the top of the file).
template <int F>
__device__ __forceinline__ void producer(const Params& p, const Tile& tl, uint8_t* smem, const uint32_t* lut) {
  constexpr int S = kStages, SW = kWStages;
  constexpr int kBAhead = S - 2;   // activation tiles in flight ahead of the decode
  constexpr int kWAhead = SW - 1;  // packed weight stages in flight ahead of the decode
  const int pt = threadIdx.x;      // 0 .. kProducers - 1
  const int64_t half_k = p.k / 2;
  const uint8_t* we = p.w + static_cast<int64_t>(tl.e) * p.n * half_k;
  // Activation chunks: row pt / 8 + 32 i, 16-byte column pt % 8, swizzled. Rows past the tile are
  // not copied: they only reach D columns that are never stored.
  constexpr int kBChunks = TM * 8 / kProducers;
  const int brow = pt >> 3, bcol = pt & 7;
  const int64_t arow = p.k * 2;  // bytes per activation row
  const uint8_t* bsrc = reinterpret_cast<const uint8_t*>(p.a) + (tl.row0 + brow) * arow + bcol * 16;
  const uint32_t bdst = static_cast<uint32_t>(brow * 128 + ((bcol ^ (brow & 7)) << 4));
  // Packed weight chunk: row pt / 2, 16-byte half pt % 2 (zero-filled past n).
  const int wr = pt >> 1;
  const bool wok = tl.n0 + wr < p.n;
  const uint8_t* wsrc = we + (tl.n0 + (wok ? wr : 0)) * half_k + (pt & 1) * 16;
  const uint32_t wdst = static_cast<uint32_t>(kWOff + wr * 32 + (((pt & 1) ^ ((wr >> 2) & 1)) << 4));
  auto issue_b = [&](int s) {
    if (s < tl.nk) {
      const uint32_t slot = tl.smem + static_cast<uint32_t>(s % S) * kBBytes;
#pragma unroll
      for (int i = 0; i < kBChunks; ++i)
        if (brow + 32 * i < tl.rows && !(p.diag & 1))
          cp_async16(slot + bdst + 32 * 128 * i, bsrc + 32 * i * arow + static_cast<int64_t>(s) * (kBK * 2), true);
    }
  };
  auto issue_w = [&](int s) {
    if (s < tl.nk && !(p.diag & 2))
      cp_async16(tl.smem + wdst + static_cast<uint32_t>(s % SW) * kWBytes, wsrc + static_cast<int64_t>(s) * (kBK / 2), wok);
  };
  // Groups: the prologue's (weights 0 .. kWAhead - 1 with activations 0; then activations 1 ..
  // kBAhead - 1), then one per stage s: activations s + kBAhead, weights s + kWAhead. Stage s's
  // data is in the group committed kBAhead groups before the stage (or earlier).
#pragma unroll
  for (int s = 0; s < kWAhead; ++s) issue_w(s);
#pragma unroll
  for (int s = 0; s < kBAhead; ++s) {
    issue_b(s);
    cp_async_commit();
  }

  // Decode ownership: weight row r (local), the even (hf = 0) or odd (hf = 1) packed words.
  const int r = pt & 127, hf = pt >> 7;
  // The row's block scales: a stage's are contiguous (MXFP4 2 e8m0 bytes, NVFP4 4 e4m3 bytes) at a
  // fixed stride per stage (linear) or in one 512-byte k group per 4 scale columns (swizzled).
  // Rows past n read row 0's (never stored); stages past the end re-read the last one (never used).
  constexpr int kBs = F == kMx ? 32 : 16, kPer = kBK / kBs;
  const int64_t scols = p.k / kBs;
  const int64_t srow = tl.n0 + r < p.n ? tl.n0 + r : 0;
  const uint8_t* sbase = static_cast<const uint8_t*>(p.scale) +
                         (p.swizzled ? tl.e * (((p.n + 127) / 128 * 128) * ((scols + 3) / 4 * 4)) + swizzled_offset(srow, 0, scols)
                                     : (tl.e * p.n + srow) * scols);
  auto scale_word = [&](int s) -> uint32_t {
    if (s >= tl.nk) s = tl.nk - 1;
    const int64_t o = !p.swizzled ? static_cast<int64_t>(s) * kPer
                                  : (F == kMx ? static_cast<int64_t>(s >> 1) * 512 + 2 * (s & 1) : static_cast<int64_t>(s) * 512);
    if constexpr (F == kMx) return __ldg(reinterpret_cast<const uint16_t*>(sbase + o));
    else return __ldg(reinterpret_cast<const uint32_t*>(sbase + o));
  };
  uint32_t sc0 = scale_word(0), sc1 = scale_word(1), sc2 = scale_word(2);  // stages s, s + 1, s + 2

  const int wsw = (r >> 2) & 1;
  const uint8_t* wread = smem + kWOff + r * 32;
  uint8_t* awrite = smem + kAOff + r * 128;
  const int rsw = r & 7;
  for (int s = 0; s < tl.nk; ++s) {
    const int slot = s % S;
    cp_async_wait<kBAhead - 1>();        // this thread's copies of stage s
    bar_sync(kBarProducer, kProducers);  // everyone's (the decode reads rows other threads copied)
    const uint8_t* wrow = wread + (s % SW) * kWBytes;
    const uint4 lo = *reinterpret_cast<const uint4*>(wrow + (wsw << 4));
    const uint4 hi = *reinterpret_cast<const uint4*>(wrow + ((wsw ^ 1) << 4));
    // Words hf, hf + 2, hf + 4, hf + 6 of the row (word w: the stage's codes 8 w .. 8 w + 7).
    const uint32_t m[4] = {hf ? lo.y : lo.x, hf ? lo.w : lo.z, hf ? hi.y : hi.x, hf ? hi.w : hi.z};
    // Their block multipliers: MXFP4 32-blocks (words 0..3, 4..7), NVFP4 16-blocks (word w: w / 2).
    uint32_t bm[4];
    if constexpr (F == kMx) {
      bm[0] = bm[1] = lut[sc0 & 0xFFu];
      bm[2] = bm[3] = lut[(sc0 >> 8) & 0xFFu];
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) bm[i] = lut[(sc0 >> (8 * i)) & 0xFFu];
    }
    uint8_t* dst = awrite + slot * kABytes;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t v[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) v[i] = bf16x2_mul(e2m1_pair(j, m[i], m[i] >> 8, p.place0, p.place1), bm[i]);
      const int c = 2 * j + hf;
      *reinterpret_cast<uint4*>(dst + ((c ^ rsw) << 4)) = make_uint4(v[0], v[1], v[2], v[3]);
    }
    fence_proxy_async();  // the copies and these stores, before the consumers' wgmmas read them
    bar_arrive(kBarFull + slot, kThreads);
    // Stage s + kBAhead's activations go to the slot of stage s - 2 once the consumers are done
    // with it; the weights' slot of stage s + kWAhead (s - 1's) every producer has decoded (the
    // producer barrier above).
    if (s >= 2) bar_sync(kBarEmpty + (s - 2) % S, kThreads);
    issue_b(s + kBAhead);
    issue_w(s + kWAhead);
    cp_async_commit();
    sc0 = sc1;
    sc1 = sc2;
    sc2 = scale_word(s + 3);
  }
  cp_async_wait<0>();
  // The releases of the last two stages (the loop waited for those of stages 0 .. nk - 3).
  for (int s = max(tl.nk - 2, 0); s < tl.nk; ++s) bar_sync(kBarEmpty + s % S, kThreads);
}

// Warpgroups 2 and 3: wgmmas and the store. Tokens 0..127 of the tile in acc0 (wgmma N = N0),
// 128..255 in acc1 (N = N1, 0: none).
template <int N0, int N1>
__device__ __forceinline__ void consumer(const Params& p, const Tile& tl, uint8_t* slot0) {
  constexpr int S = kStages;
  const int ct = threadIdx.x - kProducers, cwg = ct >> 7, warp = (ct >> 5) & 3, lane = ct & 31, g = lane >> 2, t = lane & 3;
  const int lrow = cwg * 64 + warp * 16 + g;
  float acc0[64], acc1[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc0[i] = acc1[i] = 0.0f;
  for (int s = 0; s < tl.nk; ++s) {
    const int slot = s % S;
    const uint64_t desc_b = smem_desc(tl.smem + static_cast<uint32_t>(slot) * kBBytes);
    const uint64_t desc_a = smem_desc(tl.smem + kAOff + static_cast<uint32_t>(slot) * kABytes + cwg * (kABytes / 2));
    bar_sync(kBarFull + slot, kThreads);
    fence_operand(acc0);
    fence_operand(acc1);
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      wgmma_ss<N0>(acc0, desc_a + 2 * j, desc_b + 2 * j);
      if constexpr (N1 > 0) wgmma_ss<N1>(acc1, desc_a + 2 * j, desc_b + (128 * 128) / 16 + 2 * j);
    }
    wgmma_commit();
    wgmma_wait<1>();  // stage s - 1's wgmmas are done: its slot goes back to the producers
    fence_operand(acc0);
    fence_operand(acc1);
    if (s >= 1) bar_arrive(kBarEmpty + (s - 1) % S, kThreads);
  }
  wgmma_wait<0>();
  fence_operand(acc0);
  fence_operand(acc1);
  if (tl.nk >= 1) bar_arrive(kBarEmpty + (tl.nk - 1) % S, kThreads);

  // D fragment (m64nN): acc[4 j + q] = (row lrow + 8 (q >= 2), token 8 j + 2 t + (q & 1)).
  constexpr float kOut = static_cast<float>(1 << kE2m1Shift);
  if (N0 + N1 >= 64 && p.d_bulk) {
    // Staged as [token][row] over the activation and decoded rings (every copy and decode landed before the last full
    // barrier; the consumer barrier below: both warpgroups' wgmmas are done), then one bulk copy
    // per token of its 128 rows (w4_wgmma.cu's epilogue).
    float* st = reinterpret_cast<float*>(slot0);
    bar_sync(kBarConsumer, 256);
#pragma unroll
    for (int j = 0; j < N0 / 8; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) st[(8 * j + 2 * t + (q & 1)) * kDPitch + lrow + 8 * (q >> 1)] = acc0[4 * j + q] * kOut;
#pragma unroll
    for (int j = 0; j < N1 / 8; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q)
        st[(128 + 8 * j + 2 * t + (q & 1)) * kDPitch + lrow + 8 * (q >> 1)] = acc1[4 * j + q] * kOut;
    const int64_t cols = min(static_cast<int64_t>(kRowsPerCta), p.n - tl.n0);  // rows past n are not copied
    fence_proxy_async();
    bar_sync(kBarConsumer, 256);
    if (ct < tl.rows) {
      bulk_store_1d(p.d + (tl.row0 + ct) * p.n + tl.n0, st + ct * kDPitch, static_cast<uint32_t>(cols * 4));
      bulk_commit();
      bulk_wait_read();
    }
  } else {
    const int64_t r_lo = tl.n0 + lrow, r_hi = r_lo + 8;
#pragma unroll
    for (int j = 0; j < N0 / 8; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int64_t col = q >= 2 ? r_hi : r_lo;
        const int tok = 8 * j + 2 * t + (q & 1);
        if (col < p.n && tok < tl.rows) p.d[(tl.row0 + tok) * p.n + col] = acc0[4 * j + q] * kOut;
      }
#pragma unroll
    for (int j = 0; j < N1 / 8; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int64_t col = q >= 2 ? r_hi : r_lo;
        const int tok = 128 + 8 * j + 2 * t + (q & 1);
        if (col < p.n && tok < tl.rows) p.d[(tl.row0 + tok) * p.n + col] = acc1[4 * j + q] * kOut;
      }
  }
}

template <int F>
__global__ void __launch_bounds__(kThreads, 1) w4_wgmma_ws_kernel(const __grid_constant__ Params p) {
  chain_wait();
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t slot0 = (raw_addr + 1023u) & ~1023u;
  uint8_t* slot0_gen = smem_raw + (slot0 - raw_addr);
  uint32_t* lut = reinterpret_cast<uint32_t*>(slot0_gen + kLutOff);
  if (threadIdx.x < 256) lut[threadIdx.x] = scale_bits<F>(threadIdx.x);  // ordered by find_tile's barriers
  int e, tile;
  find_tile<kThreads, TM>(p.offsets, p.groups, static_cast<int>(blockIdx.y), e, tile);
  if (e < 0) return;
  Tile tl;
  tl.e = e;
  tl.smem = slot0;
  tl.n0 = static_cast<int64_t>(blockIdx.x) * kRowsPerCta;
  tl.row0 = p.offsets[e] + static_cast<int64_t>(tile) * TM;
  tl.rows = static_cast<int>(min(static_cast<int64_t>(TM), static_cast<int64_t>(p.offsets[e + 1]) - tl.row0));
  tl.nk = static_cast<int>(p.k / kBK);
  if (threadIdx.x < kProducers) {
    setmaxnreg_dec<kProducerRegs>();
    producer<F>(p, tl, slot0_gen, lut);
    return;
  }
  setmaxnreg_inc<kConsumerRegs>();
  // Half widths: the fewest of 32 / 64 / 128 that hold the rows (the second half only past 128).
  const int n0w = half_n(min(tl.rows, 128)), n1w = tl.rows > 128 ? half_n(tl.rows - 128) : 0;
  if (n1w == 128) consumer<128, 128>(p, tl, slot0_gen);
  else if (n1w == 64) consumer<128, 64>(p, tl, slot0_gen);
  else if (n1w == 32) consumer<128, 32>(p, tl, slot0_gen);
  else if (n0w == 128) consumer<128, 0>(p, tl, slot0_gen);
  else if (n0w == 64) consumer<64, 0>(p, tl, slot0_gen);
  else consumer<32, 0>(p, tl, slot0_gen);
}

template <int F>
void launch(const Params& p, int64_t max_rows, cudaStream_t stream) {
  opt_in_dynamic_smem<w4_wgmma_ws_kernel<F>>(kSmem);
  const int64_t active = std::min<int64_t>(max_rows, p.groups);
  const int64_t tiles = (max_rows + TM - 1) / TM + active;  // >= the sum over experts of ceil(rows / TM)
  if (tiles > 65535) throw Error("w4 wgmma GEMM (warp-specialised): " + std::to_string(max_rows) + " rows need more token tiles than a grid holds");
  const dim3 grid(static_cast<unsigned>((p.n + kRowsPerCta - 1) / kRowsPerCta), static_cast<unsigned>(tiles));
  launch_chained(w4_wgmma_ws_kernel<F>, grid, dim3(kThreads), kSmem, stream, p);
}

}  // namespace

void w4_wgmma_ws_grouped_gemm(const W4Weights& w, const void* a, float* d, int groups, const int32_t* offsets,
                              int64_t max_rows, cudaStream_t stream) {
  if (max_rows <= 0 || groups <= 0) return;
  if (!w4_wgmma_shape_ok(w)) throw Error("w4 wgmma GEMM: needs MXFP4 / NVFP4 weights, k % 64 == 0, aligned pointers");
  Params p;
  p.w = w.w;
  p.scale = w.scale;
  p.a = static_cast<const uint16_t*>(a);
  p.d = d;
  p.n = w.n;
  p.k = w.k;
  p.groups = groups;
  p.offsets = offsets;
  p.swizzled = w.swizzled;
  p.d_bulk = w.n % 4 == 0 && reinterpret_cast<uintptr_t>(d) % 16 == 0;
  static const int diag = std::getenv("FUSEDMOE_W4_DIAG") ? std::atoi(std::getenv("FUSEDMOE_W4_DIAG")) : 0;
  p.diag = diag;
  if (w.format == Format::MXFP4) launch<kMx>(p, max_rows, stream);
  else launch<kNv>(p, max_rows, stream);
}

}  // namespace fusedmoe::cuda
