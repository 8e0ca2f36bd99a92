// W4A8 grouped GEMM on Hopper's fp8 wgmma for many tokens per expert: int4 weights decoded to
// e5m2 codes inside the mainloop (int4 is exact in e5m2; int4_fp8.cuh), e4m3 activation codes
// (the per-token scale is applied by the next stage, as on the other ways), fp32 sums. Replaces
// the dequant way for W4A8 (decode every hit expert to an e4m3 copy in the workspace, then the
// CUTLASS groupwise GEMM on it: 2.5 bytes of traffic per weight before the GEMM reads it).
//
// Numerics are the other W4A8 ways' (w4_gemm.hpp): one 128-wide scale group per stage, its
// products summed by the tensor cores into fp32 partial sums that start from zero, then
// acc = fma(partial, group scale, acc) per weight row, group after group in k order. (The fp8
// tensor cores add a k32 step's products with a short fraction, as in every fp8 GEMM: the reason
// for promoting each group to fp32 registers.)
//
// Tile: swap-AB as w4_wgmma.cu - the CTA owns 128 weight rows (the wgmma M side) and up to 160
// tokens of one expert (wgmma N = 32 .. 160, the fewest multiple of 32 that holds the tile's rows,
// one instance per width). 160 rather than 256: a consumer thread holds the running sums and one
// group's partial sums, 2 x N / 2 registers.
// Warp-specialised, four warpgroups:
//   producers (warpgroups 0 and 1, 64 registers): cp.async copies of stage s + kStages - 1
//     (activations into the 128-byte swizzle wgmma reads, packed weights), and the decode of
//     stage s: each thread half a weight row, 32 packed bytes -> 64 e5m2 codes stored as the A
//     tile in the same swizzle; then they signal the stage full.
//   consumers (warpgroups 2 and 3, 64 weight rows each, 184 registers): wait for the stage, four
//     k32 wgmmas with both operands in shared memory into the partial sums, wait for them, release
//     the stage to the producers, fold the partial sums in with the group scale.
// Stage hand-off uses named barriers (full: producers arrive, consumers wait; empty: the
// reverse), one pair per ring slot.
// Measured on the way (H100, bench/results/2026-11-22-h100-w4a8-wgmma): the first version had both
// warpgroups decode int4 -> e4m3 (byte permutes only) into A registers and copy: 378 instructions
// per warp and stage, 45% issue. One producer warpgroup was slower (it alone decoded); two were
// even; the e5m2 decode (fp16 adds instead of permutes on the half-rate integer pipe) made this
// version 0.92-0.98x the first. What bounds it now is mostly L2: the activation tile is re-read
// by each CTA of a token tile (n / 128 of them); the copies and hand-offs alone, without decode
// or wgmma, take 78% of the kernel's time (v4-diagnostics there).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "cuda/chained_launch.cuh"
#include "cuda/int4_fp8.cuh"
#include "cuda/smem_opt_in.hpp"
#include "cuda/w4_gemm.hpp"
#include "cuda/wgmma_util.cuh"
#include "fusedmoe/error.hpp"

namespace fusedmoe::cuda {
namespace {

using namespace wg;
using int4fp8::int4x8_to_e5m2;

constexpr int kProducers = 256;   // two producer warpgroups
constexpr int kThreads = kProducers + 256;  // + two consumer warpgroups
constexpr int kRowsPerCta = 128;  // weight rows (64 per consumer warpgroup)
constexpr int kBK = 128;          // k per stage: one scale group, one 128-byte swizzle row of e4m3
constexpr int kWPitch = 80;       // bytes per packed weight row per stage (64 used; 80: a quarter-warp's rows in distinct banks)
constexpr int TM = 160;           // tokens per CTA tile (wgmma N <= 160)
constexpr int kMaxAcc = TM / 2;   // fp32 registers per thread of an m64n160 accumulator
constexpr int kStages = 4;
constexpr int kBBytes = TM * 128;               // activation tile of a stage
constexpr int kABytes = kRowsPerCta * 128;      // decoded weight tile (two 8 KB warpgroup halves)
constexpr int kWBytes = kRowsPerCta * kWPitch;  // packed weight tile
constexpr int kSlot = kBBytes + kABytes + kWBytes;  // a multiple of 1024: every tile stays 1024-aligned
static_assert(kSlot % 1024 == 0 && kBBytes % 1024 == 0 && kABytes % 1024 == 0, "swizzled tiles must be 1024-aligned");
constexpr int kSmem = kStages * kSlot + 1024;  // + alignment slack
constexpr int kProducerRegs = 64, kConsumerRegs = 184;  // 256 x 64 + 256 x 184 <= 64 K (176 spills)
constexpr int kBarProducer = 1, kBarFull = 2, kBarEmpty = 2 + kStages;  // named barrier ids (0: __syncthreads)
static_assert(kBarEmpty + kStages <= 16, "16 named barriers");

struct Params {
  const uint8_t* w;       // [E, n, k / 2] packed int4
  const uint16_t* scale;  // [E, n, k / 128] bf16
  const uint8_t* a;       // [rows, k] e4m3 codes
  float* d;               // [rows, n]
  int64_t n, k;
  int groups;
  const int32_t* offsets;
  uint32_t to_biased;  // xor that makes the stored nibbles q + 8 (0x88888888 for two's complement, 0 for uint4b8)
};

// D[64 x 32] (+)= A[64 x 32] x B[32 x 32], A e5m2, B e4m3, both in shared memory (K-major): d[0 .. 16).
__device__ __forceinline__ void wgmma_n32(float (&d)[kMaxAcc], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k32.f32.e5m2.e4m3 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// D[64 x 64] (+)= A[64 x 32] x B[32 x 64], A e5m2, B e4m3, both in shared memory (K-major): d[0 .. 32).
__device__ __forceinline__ void wgmma_n64(float (&d)[kMaxAcc], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e5m2.e4m3 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// D[64 x 96] (+)= A[64 x 32] x B[32 x 96], A e5m2, B e4m3, both in shared memory (K-major): d[0 .. 48).
__device__ __forceinline__ void wgmma_n96(float (&d)[kMaxAcc], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n96k32.f32.e5m2.e4m3 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47}, %48, %49, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// D[64 x 128] (+)= A[64 x 32] x B[32 x 128], A e5m2, B e4m3, both in shared memory (K-major): d[0 .. 64).
__device__ __forceinline__ void wgmma_n128(float (&d)[kMaxAcc], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e5m2.e4m3 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// D[64 x 160] (+)= A[64 x 32] x B[32 x 160], A e5m2, B e4m3, both in shared memory (K-major): d[0 .. 80).
__device__ __forceinline__ void wgmma_n160(float (&d)[kMaxAcc], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %82, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n160k32.f32.e5m2.e4m3 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79}, %80, %81, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

template <int N>
__device__ __forceinline__ void wgmma_tile(float (&d)[kMaxAcc], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  if constexpr (N == 32) wgmma_n32(d, desc_a, desc_b, accumulate);
  else if constexpr (N == 64) wgmma_n64(d, desc_a, desc_b, accumulate);
  else if constexpr (N == 96) wgmma_n96(d, desc_a, desc_b, accumulate);
  else if constexpr (N == 128) wgmma_n128(d, desc_a, desc_b, accumulate);
  else wgmma_n160(d, desc_a, desc_b, accumulate);
}
template <int V>
using IntC = std::integral_constant<int, V>;

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

struct Tile {
  int e;
  int64_t row0;  // first activation row of the tile
  int rows;      // tokens in the tile (<= TM)
  int64_t n0;    // first weight row of the CTA
  int nk;        // stages (k / 128)
  uint32_t smem;  // shared address of slot 0 (1024-aligned)
};

// Warpgroups 0 and 1: copies and decode (see the top of the file).
__device__ __forceinline__ void producer(const Params& p, const Tile& tl, uint8_t* smem_gen) {
  constexpr int S = kStages;
  const int pt = threadIdx.x;  // 0 .. kProducers - 1
  const int64_t half_k = p.k / 2;
  const uint8_t* we = p.w + static_cast<int64_t>(tl.e) * p.n * half_k;
  // Activation chunks (row pt / 8 + 32 i, 16-byte column pt % 8), swizzled; rows past the tile
  // are not copied (they only reach D columns that are never stored). Packed weight chunks (row
  // pt / 4 + 64 i, column pt % 4), zero-filled past n.
  constexpr int kBChunks = TM * 8 / kProducers, kWChunks = kRowsPerCta * 4 / kProducers;
  constexpr int kBRowStep = kProducers / 8, kWRowStep = kProducers / 4;
  const int brow = pt >> 3, bcol = pt & 7;
  const uint8_t* bsrc = p.a + (tl.row0 + brow) * p.k + bcol * 16;
  const uint32_t bdst = static_cast<uint32_t>(brow * 128 + ((bcol ^ (brow & 7)) << 4));
  const int wrow = pt >> 2, wcol = pt & 3;
  const uint8_t* wsrc[kWChunks];
  bool wok[kWChunks];
#pragma unroll
  for (int i = 0; i < kWChunks; ++i) {
    wok[i] = tl.n0 + wrow + kWRowStep * i < p.n;
    wsrc[i] = we + (tl.n0 + (wok[i] ? wrow + kWRowStep * i : 0)) * half_k + wcol * 16;
  }
  const uint32_t wdst = static_cast<uint32_t>(kBBytes + kABytes + wrow * kWPitch + wcol * 16);
  auto issue = [&](int s) {
    if (s < tl.nk) {
      const uint32_t slot = tl.smem + static_cast<uint32_t>(s % S) * kSlot;
#pragma unroll
      for (int i = 0; i < kBChunks; ++i)
        if (brow + kBRowStep * i < tl.rows)
          cp_async16(slot + bdst + kBRowStep * 128 * i, bsrc + (kBRowStep * i) * p.k + static_cast<int64_t>(s) * kBK, true);
#pragma unroll
      for (int i = 0; i < kWChunks; ++i)
        cp_async16(slot + wdst + kWRowStep * kWPitch * i, wsrc[i] + static_cast<int64_t>(s) * (kBK / 2), wok[i]);
    }
    cp_async_commit();  // always a group, maybe empty: the wait counts stay uniform
  };

#pragma unroll
  for (int s = 0; s < S - 1; ++s) issue(s);
  // Decode: thread pt owns half hf = pt / 128 of weight row r = pt % 128 (a warp: 32 rows, so a
  // quarter-warp's 16-byte loads and stores hit distinct banks) - 32 packed bytes per stage in,
  // 4 swizzled 16-byte chunks of e5m2 codes out (chunk c = packed words 2c, 2c + 1 = k 16c ..).
  const int r = pt & 127, hf = pt >> 7;
  const uint8_t* wread = smem_gen + kBBytes + kABytes + r * kWPitch + 32 * hf;
  uint8_t* awrite = smem_gen + kBBytes + r * 128;
  for (int s = 0; s < tl.nk; ++s) {
    const int slot = s % S;
    cp_async_wait<S - 2>();    // this thread's copies of stage s
    bar_sync(kBarProducer, kProducers);  // everyone's (the decode reads rows other threads copied)
    const uint8_t* src = wread + slot * kSlot;
    uint8_t* dst = awrite + slot * kSlot;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint4 w4 = *reinterpret_cast<const uint4*>(src + 16 * h);
      const uint32_t words[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
      for (int c2 = 0; c2 < 2; ++c2) {
        const auto c0 = int4x8_to_e5m2(words[2 * c2], p.to_biased), c1 = int4x8_to_e5m2(words[2 * c2 + 1], p.to_biased);
        const int c = 4 * hf + 2 * h + c2;
        *reinterpret_cast<uint4*>(dst + ((c ^ (r & 7)) << 4)) = make_uint4(c0.lo, c0.hi, c1.lo, c1.hi);
      }
    }
    fence_proxy_async();  // the copies and these stores, before the consumers' wgmmas read them
    bar_arrive(kBarFull + slot, kThreads);
    // Refill the slot of stage s - 1 with stage s + S - 1 once the consumers are done with it.
    if (s >= 1) bar_sync(kBarEmpty + (s - 1) % S, kThreads);
    issue(s + S - 1);
  }
  cp_async_wait<0>();
  if (tl.nk >= 1) bar_sync(kBarEmpty + (tl.nk - 1) % S, kThreads);  // the last stage's release
}

// Warpgroups 2 and 3: wgmmas, promotion with the group scales, the store.
template <int N>
__device__ __forceinline__ void consumer(const Params& p, const Tile& tl) {
  constexpr int S = kStages, R = N / 2;
  const int ct = threadIdx.x - kProducers, cwg = ct >> 7, warp = (ct >> 5) & 3, lane = ct & 31, g = lane >> 2, t = lane & 3;
  const int lrow = cwg * 64 + warp * 16 + g;
  const int64_t r_lo = tl.n0 + lrow, r_hi = r_lo + 8;
  const int nk = tl.nk;
  // Group scales of rows r_lo / r_hi (rows past n read row 0's: never stored; stages past the
  // end read the last one).
  const uint16_t* sp_lo = p.scale + (static_cast<int64_t>(tl.e) * p.n + (r_lo < p.n ? r_lo : 0)) * nk;
  const uint16_t* sp_hi = p.scale + (static_cast<int64_t>(tl.e) * p.n + (r_hi < p.n ? r_hi : 0)) * nk;
  auto scales = [&](int s, uint32_t& lo, uint32_t& hi) {
    s = min(s, nk - 1);
    lo = __ldg(sp_lo + s);
    hi = __ldg(sp_hi + s);
  };
  uint32_t sc0[2], sc1[2], sc2[2];  // raw bf16 group scales of stages s, s + 1, s + 2
  scales(0, sc0[0], sc0[1]);
  scales(1, sc1[0], sc1[1]);
  scales(2, sc2[0], sc2[1]);
  float acc[kMaxAcc], part[kMaxAcc];
#pragma unroll
  for (int i = 0; i < kMaxAcc; ++i) acc[i] = part[i] = 0.0f;
  for (int s = 0; s < nk; ++s) {
    const int slot = s % S;
    const uint32_t base = tl.smem + static_cast<uint32_t>(slot) * kSlot;
    const uint64_t desc_b = smem_desc(base), desc_a = smem_desc(base + kBBytes + cwg * (kABytes / 2));
    bar_sync(kBarFull + slot, kThreads);
    fence_operand(part);
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < 4; ++j) wgmma_tile<N>(part, desc_a + 2 * j, desc_b + 2 * j, j > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_operand(part);
    bar_arrive(kBarEmpty + slot, kThreads);
    const float s_lo = __uint_as_float(sc0[0] << 16), s_hi = __uint_as_float(sc0[1] << 16);
#pragma unroll
    for (int i = 0; i < R; ++i) acc[i] = fmaf(part[i], (i & 2) ? s_hi : s_lo, acc[i]);
    sc0[0] = sc1[0];
    sc0[1] = sc1[1];
    sc1[0] = sc2[0];
    sc1[1] = sc2[1];
    scales(s + 3, sc2[0], sc2[1]);
  }
  // D fragment (m64nN): acc[4 j + q] = (row lrow + 8 (q >= 2), token 8 j + 2 t + (q & 1)).
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int64_t col = (q >= 2 ? r_hi : r_lo);
      const int tok = 8 * j + 2 * t + (q & 1);
      if (col < p.n && tok < tl.rows) p.d[(tl.row0 + tok) * p.n + col] = acc[4 * j + q];
    }
}

__global__ void __launch_bounds__(kThreads, 1) w4a8_wgmma_kernel(const __grid_constant__ Params p) {
  chain_wait();
  extern __shared__ uint8_t smem_raw[];
  int e, tile;
  find_tile<kThreads, TM>(p.offsets, p.groups, static_cast<int>(blockIdx.y), e, tile);
  if (e < 0) return;
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  Tile tl;
  tl.e = e;
  tl.smem = (raw_addr + 1023u) & ~1023u;
  tl.n0 = static_cast<int64_t>(blockIdx.x) * kRowsPerCta;
  tl.row0 = p.offsets[e] + static_cast<int64_t>(tile) * TM;
  tl.rows = static_cast<int>(min(static_cast<int64_t>(TM), static_cast<int64_t>(p.offsets[e + 1]) - tl.row0));
  tl.nk = static_cast<int>(p.k / kBK);
  if (threadIdx.x < kProducers) {
    setmaxnreg_dec<kProducerRegs>();
    producer(p, tl, smem_raw + (tl.smem - raw_addr));
    return;
  }
  setmaxnreg_inc<kConsumerRegs>();
  // The fewest multiple of 32 tokens that holds the tile's rows.
  if (tl.rows > 128) consumer<160>(p, tl);
  else if (tl.rows > 96) consumer<128>(p, tl);
  else if (tl.rows > 64) consumer<96>(p, tl);
  else if (tl.rows > 32) consumer<64>(p, tl);
  else consumer<32>(p, tl);
}

}  // namespace

bool w4a8_wgmma_shape_ok(const W4Weights& w) {
  return w.format == Format::W4A8_INT4 && w.k % kBK == 0 && w.k > 0 && w.n > 0 &&
         reinterpret_cast<uintptr_t>(w.w) % 16 == 0 && reinterpret_cast<uintptr_t>(w.scale) % 2 == 0;
}

void w4a8_wgmma_grouped_gemm(const W4Weights& w, const uint8_t* a, float* d, int groups, const int32_t* offsets,
                             int64_t max_rows, cudaStream_t stream) {
  if (max_rows <= 0 || groups <= 0) return;
  if (!w4a8_wgmma_shape_ok(w)) throw Error("w4a8 wgmma GEMM: needs W4A8 weights, k % 128 == 0, aligned pointers");
  Params p;
  p.w = w.w;
  p.scale = static_cast<const uint16_t*>(w.scale);
  p.a = a;
  p.d = d;
  p.n = w.n;
  p.k = w.k;
  p.groups = groups;
  p.offsets = offsets;
  p.to_biased = w.uint4b8 ? 0u : 0x88888888u;
  opt_in_dynamic_smem<w4a8_wgmma_kernel>(kSmem);
  const int64_t active = std::min<int64_t>(max_rows, groups);
  const int64_t tiles = (max_rows + TM - 1) / TM + active;  // >= the sum over experts of ceil(rows / TM)
  if (tiles > 65535) throw Error("w4a8 wgmma GEMM: " + std::to_string(max_rows) + " rows need more token tiles than a grid holds");
  const dim3 grid(static_cast<unsigned>((w.n + kRowsPerCta - 1) / kRowsPerCta), static_cast<unsigned>(tiles));
  launch_chained(w4a8_wgmma_kernel, grid, dim3(kThreads), kSmem, stream, p);
}

}  // namespace fusedmoe::cuda
