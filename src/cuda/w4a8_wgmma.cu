// W4A8 grouped GEMM on Hopper's fp8 wgmma for many tokens per expert: int4 weights decoded to
// e4m3 codes inside the mainloop (int4 is exact in e4m3; int4_e4m3.cuh), e4m3 activation codes
// (the per-token scale is applied by the next stage, as on the other ways), fp32 sums. Replaces
// the dequant way for W4A8 (decode every hit expert to an e4m3 copy in the workspace, then the
// CUTLASS groupwise GEMM on it: 2.5 bytes of traffic per weight before the GEMM reads it).
//
// Numerics are the other W4A8 ways' (w4_gemm.hpp): one 128-wide scale group per stage, its
// products summed by the tensor cores into fp32 partial sums that start from zero, then
// acc = fma(partial, group scale, acc) per weight row, group after group in k order.
//
// Tile: as w4_wgmma.cu's, swap-AB - a CTA of two warpgroups owns 128 weight rows (64 each, the
// wgmma M side, A from registers) and up to 160 tokens of one expert (wgmma N = 32 .. 160, the
// fewest multiple of 32 that holds the tile's rows, one instance per width; the B operand from
// shared memory). 160 rather than 256: a warpgroup holds the running sums and one group's
// partial sums, 2 x N / 2 registers per thread.
// Pipeline per 128-k stage s: the wgmmas of stage s are issued on the fragments decoded the
// stage before; while they run, the CTA waits for stage s + 1's copies, issues stage
// s + kStages - 1's (cp.async, all 256 threads), and decodes stage s + 1's fragments into a second
// register set; then it waits for its wgmmas and folds the partial sums in with the group scale.
// Decode: for k32 step j the fp8 A fragment of lane (g, t) holds rows g / g + 8 at k = 32 j + 4t
// .. + 3 and 32 j + 16 + 4t .. + 3: two half-words of the row's packed bytes (16 j + 2t and
// 16 j + 8 + 2t), one prmt joins them into a word of eight int4 values, int4x8_to_e4m3 makes the
// two fragment registers.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "cuda/chained_launch.cuh"
#include "cuda/int4_e4m3.cuh"
#include "cuda/smem_opt_in.hpp"
#include "cuda/w4_gemm.hpp"
#include "cuda/wgmma_util.cuh"
#include "fusedmoe/error.hpp"

namespace fusedmoe::cuda {
namespace {

using namespace wg;
using int4e4m3::int4x8_to_e4m3;
using int4e4m3::prmt;

constexpr int kThreads = 256;     // two warpgroups
constexpr int kRowsPerCta = 128;  // weight rows (64 per warpgroup)
constexpr int kBK = 128;          // k per stage: one scale group, one 128-byte swizzle row of e4m3 activations
constexpr int kWPitch = 80;       // bytes per weight row per stage (64 used; 80: a warp's 16 words per load in distinct banks)
constexpr int TM = 160;           // tokens per CTA tile (wgmma N <= 160)
constexpr int kMaxAcc = TM / 2;   // fp32 registers per thread of an m64n160 accumulator
constexpr int kStages = 5;
constexpr int kBBytes = TM * 128;               // activation tile of a stage (a multiple of 1024)
constexpr int kWBytes = kRowsPerCta * kWPitch;  // weight tile of a stage
constexpr int kSmem = kStages * (kBBytes + kWBytes) + 1024;  // + alignment slack

struct Params {
  const uint8_t* w;       // [E, n, k / 2] packed int4
  const uint16_t* scale;  // [E, n, k / 128] bf16
  const uint8_t* a;       // [rows, k] e4m3 codes
  float* d;               // [rows, n]
  int64_t n, k;
  int groups;
  const int32_t* offsets;
  uint32_t flip;  // xor that makes the stored nibbles two's complement (0x88888888 for q + 8)
};

// D[64 x 32] (+)= A[64 x 32] (registers, e4m3) x B[32 x 32] (shared memory, K-major, e4m3): d[0 .. 16).
__device__ __forceinline__ void wgmma_n32(float (&d)[kMaxAcc], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, %20, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
}

// D[64 x 64] (+)= A[64 x 32] (registers, e4m3) x B[32 x 64] (shared memory, K-major, e4m3): d[0 .. 32).
__device__ __forceinline__ void wgmma_n64(float (&d)[kMaxAcc], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
}

// D[64 x 96] (+)= A[64 x 32] (registers, e4m3) x B[32 x 96] (shared memory, K-major, e4m3): d[0 .. 48).
__device__ __forceinline__ void wgmma_n96(float (&d)[kMaxAcc], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n96k32.f32.e4m3.e4m3 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47}, {%48,%49,%50,%51}, %52, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
}

// D[64 x 128] (+)= A[64 x 32] (registers, e4m3) x B[32 x 128] (shared memory, K-major, e4m3): d[0 .. 64).
__device__ __forceinline__ void wgmma_n128(float (&d)[kMaxAcc], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
}

// D[64 x 160] (+)= A[64 x 32] (registers, e4m3) x B[32 x 160] (shared memory, K-major, e4m3): d[0 .. 80).
__device__ __forceinline__ void wgmma_n160(float (&d)[kMaxAcc], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %85, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n160k32.f32.e4m3.e4m3 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79}, {%80,%81,%82,%83}, %84, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
}

template <int N>
__device__ __forceinline__ void wgmma_tile(float (&d)[kMaxAcc], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
  if constexpr (N == 32) wgmma_n32(d, a, desc, accumulate);
  else if constexpr (N == 64) wgmma_n64(d, a, desc, accumulate);
  else if constexpr (N == 96) wgmma_n96(d, a, desc, accumulate);
  else if constexpr (N == 128) wgmma_n128(d, a, desc, accumulate);
  else wgmma_n160(d, a, desc, accumulate);
}
template <int V>
using IntC = std::integral_constant<int, V>;

__global__ void __launch_bounds__(kThreads, 1) w4a8_wgmma_kernel(const __grid_constant__ Params p) {
  chain_wait();
  constexpr int S = kStages;
  extern __shared__ uint8_t smem_raw[];
  int e, tile;
  find_tile<kThreads, TM>(p.offsets, p.groups, static_cast<int>(blockIdx.y), e, tile);
  if (e < 0) return;
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t sb_addr = (raw_addr + 1023u) & ~1023u;  // activation tiles (1024-aligned)
  const uint32_t sw_addr = sb_addr + S * kBBytes;      // weight tiles
  const uint8_t* sw = smem_raw + (sw_addr - raw_addr);

  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kRowsPerCta;
  const int64_t row0 = p.offsets[e] + static_cast<int64_t>(tile) * TM;
  const int rows = static_cast<int>(min(static_cast<int64_t>(TM), static_cast<int64_t>(p.offsets[e + 1]) - row0));
  const int64_t half_k = p.k / 2;
  const int nk = static_cast<int>(p.k / kBK);
  const uint8_t* we = p.w + static_cast<int64_t>(e) * p.n * half_k;

  // Copy plan, fixed over the k loop (stage s adds s x 128 bytes of activations and s x 64 bytes
  // of weights). Activation chunk (row tid / 8 + 32 i, 16-byte column tid % 8) lands in the
  // 128-byte swizzle wgmma reads; rows past the tile's end are not copied (they only reach D
  // columns that are never stored). Weight chunks: rows tid / 4 and tid / 4 + 64, 16-byte column
  // tid % 4 (zero-filled past n).
  constexpr int kBChunks = TM * 8 / kThreads;
  const int brow = tid >> 3, bcol = tid & 7;
  const uint8_t* bsrc[kBChunks];
  bool bok[kBChunks];
#pragma unroll
  for (int i = 0; i < kBChunks; ++i) {
    const int r = brow + 32 * i;
    bok[i] = r < rows;
    bsrc[i] = p.a + (row0 + (bok[i] ? r : 0)) * p.k + bcol * 16;
  }
  const uint32_t bdst = static_cast<uint32_t>(brow * 128 + ((bcol ^ (brow & 7)) << 4));
  const uint8_t* wsrc[2];
  bool wok[2];
  uint32_t wdst[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int wr = (tid >> 2) + 64 * i;
    wok[i] = n0 + wr < p.n;
    wsrc[i] = we + (n0 + (wok[i] ? wr : 0)) * half_k + (tid & 3) * 16;
    wdst[i] = static_cast<uint32_t>(wr * kWPitch + (tid & 3) * 16);
  }
  auto issue = [&](int s, uint32_t buf) {  // buf = s % S
    if (s < nk) {
#pragma unroll
      for (int i = 0; i < kBChunks; ++i)
        if (bok[i]) cp_async16(sb_addr + buf * kBBytes + bdst + 32 * 128 * i, bsrc[i] + static_cast<int64_t>(s) * kBK, true);
#pragma unroll
      for (int i = 0; i < 2; ++i)
        cp_async16(sw_addr + buf * kWBytes + wdst[i], wsrc[i] + static_cast<int64_t>(s) * (kBK / 2), wok[i]);
    }
    cp_async_commit();  // always a group, maybe empty: the wait counts stay uniform
  };

  // This thread's weight rows (fragment rows g and g + 8 of its warp's 16) and their group
  // scales (rows past n read row 0's: never stored; stages past the end read the last one).
  const int lrow = wg * 64 + warp * 16 + g;
  const int64_t r_lo = n0 + lrow, r_hi = r_lo + 8;
  const uint16_t* sp_lo = p.scale + (static_cast<int64_t>(e) * p.n + (r_lo < p.n ? r_lo : 0)) * nk;
  const uint16_t* sp_hi = p.scale + (static_cast<int64_t>(e) * p.n + (r_hi < p.n ? r_hi : 0)) * nk;
  auto scales = [&](int s, uint32_t& lo, uint32_t& hi) {
    s = min(s, nk - 1);
    lo = __ldg(sp_lo + s);
    hi = __ldg(sp_hi + s);
  };
  // Word addresses of k32 step 0 (row lo): bytes 4 (t / 2) and 8 + 4 (t / 2); step j adds 16 j.
  const uint8_t* wread = sw + lrow * kWPitch + 4 * (t >> 1);
  auto lds32 = [](const uint8_t* q) { return *reinterpret_cast<const uint32_t*>(q); };
  const uint32_t sel = (t & 1) ? 0x7632u : 0x5410u;  // half-word t % 2 of each of the two words
  auto decode = [&](uint32_t buf, uint32_t (&A)[4][4]) {
    const uint8_t* base = wread + buf * kWBytes;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t xl = prmt(lds32(base + 16 * j), lds32(base + 16 * j + 8), sel) ^ p.flip;
      const uint32_t xh = prmt(lds32(base + 8 * kWPitch + 16 * j), lds32(base + 8 * kWPitch + 16 * j + 8), sel) ^ p.flip;
      const auto cl = int4x8_to_e4m3(xl), ch = int4x8_to_e4m3(xh);
      A[j][0] = cl.lo;  // row g,     k 32 j + 4t .. + 3
      A[j][1] = ch.lo;  // row g + 8
      A[j][2] = cl.hi;  // row g,     k 32 j + 16 + 4t .. + 3
      A[j][3] = ch.hi;  // row g + 8
    }
  };

  auto mainloop = [&](auto nc) {
    constexpr int N = decltype(nc)::value, R = N / 2;
    float acc[kMaxAcc], part[kMaxAcc];
#pragma unroll
    for (int i = 0; i < kMaxAcc; ++i) acc[i] = part[i] = 0.0f;

#pragma unroll
    for (int s = 0; s < S - 1; ++s) issue(s, static_cast<uint32_t>(s));
    uint32_t sc0[2], sc1[2], sc2[2];  // raw bf16 group scales of stages s, s + 1, s + 2
    scales(0, sc0[0], sc0[1]);
    scales(1, sc1[0], sc1[1]);
    scales(2, sc2[0], sc2[1]);
    cp_async_wait<S - 2>();  // stage 0 (this thread's copies)
    fence_proxy_async();
    __syncthreads();
    uint32_t A[4][4];
    decode(0, A);

    uint32_t buf = 0, ibuf = S - 1;  // s % S and (s + S - 1) % S
    for (int s = 0; s < nk; ++s) {
#pragma unroll
      for (int j = 0; j < 4; ++j) fence_regs(A[j]);
      fence_operand(part);
      wgmma_fence();
      const uint64_t desc0 = smem_desc(sb_addr + buf * kBBytes);
#pragma unroll
      for (int j = 0; j < 4; ++j) wgmma_tile<N>(part, A[j], desc0 + 2 * j, j > 0);
      wgmma_commit();
      fence_operand(part);
      // While they run: stage s + 1's copies landed (everyone's: the barrier), stage s - 1's
      // buffer free (every warp waited for its wgmmas last iteration), refill it, decode s + 1.
      cp_async_wait<S - 3>();
      fence_proxy_async();
      __syncthreads();
      issue(s + S - 1, ibuf);
      const uint32_t nbuf = buf + 1 == S ? 0 : buf + 1;
      uint32_t An[4][4];
      if (s + 1 < nk) decode(nbuf, An);
      wgmma_wait<0>();
      fence_operand(part);
      const float s_lo = __uint_as_float(sc0[0] << 16), s_hi = __uint_as_float(sc0[1] << 16);
#pragma unroll
      for (int i = 0; i < R; ++i) acc[i] = fmaf(part[i], (i & 2) ? s_hi : s_lo, acc[i]);
      if (s + 1 < nk) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int q = 0; q < 4; ++q) A[j][q] = An[j][q];
      }
      sc0[0] = sc1[0];
      sc0[1] = sc1[1];
      sc1[0] = sc2[0];
      sc1[1] = sc2[1];
      scales(s + 3, sc2[0], sc2[1]);
      buf = nbuf;
      ibuf = ibuf + 1 == S ? 0 : ibuf + 1;
    }
    cp_async_wait<0>();

    // D fragment (m64nN): acc[4 j + q] = (row lrow + 8 (q >= 2), token 8 j + 2 t + (q & 1)).
#pragma unroll
    for (int j = 0; j < N / 8; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int64_t col = (q >= 2 ? r_hi : r_lo);
        const int tok = 8 * j + 2 * t + (q & 1);
        if (col < p.n && tok < rows) p.d[(row0 + tok) * p.n + col] = acc[4 * j + q];
      }
  };
  // The fewest multiple of 32 tokens that holds the tile's rows.
  if (rows > 128) mainloop(IntC<160>{});
  else if (rows > 96) mainloop(IntC<128>{});
  else if (rows > 64) mainloop(IntC<96>{});
  else if (rows > 32) mainloop(IntC<64>{});
  else mainloop(IntC<32>{});
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
  p.flip = w.uint4b8 ? 0x88888888u : 0u;
  opt_in_dynamic_smem<w4a8_wgmma_kernel>(kSmem);
  const int64_t active = std::min<int64_t>(max_rows, groups);
  const int64_t tiles = (max_rows + TM - 1) / TM + active;  // >= the sum over experts of ceil(rows / TM)
  if (tiles > 65535) throw Error("w4a8 wgmma GEMM: " + std::to_string(max_rows) + " rows need more token tiles than a grid holds");
  const dim3 grid(static_cast<unsigned>((w.n + kRowsPerCta - 1) / kRowsPerCta), static_cast<unsigned>(tiles));
  launch_chained(w4a8_wgmma_kernel, grid, dim3(kThreads), kSmem, stream, p);
}

}  // namespace fusedmoe::cuda
