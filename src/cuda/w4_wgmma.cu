// 4-bit weight grouped GEMM on Hopper's wgmma (MXFP4 / NVFP4 weights, bf16 operand), for many
// tokens per expert: the weights are decoded inside the mainloop, so each packed byte is read
// from memory once per token tile instead of being decoded to a 16-bit copy in the workspace and
// read back (the dequant way, w4_gemm.hpp). Numerics are the dequant way's: every e2m1 x block
// scale product is an exact bf16 value (w4_decode.cuh), fp32 accumulation in the tensor cores.
//
// Tile: a CTA of two warpgroups owns 128 weight rows (64 per warpgroup, the wgmma M side) and
// TM tokens of one expert (the wgmma N side) - swap-AB, so the weights are the register-sourced
// operand A and the activations the shared-memory operand B, and D is the transposed output
// tile (weight rows x tokens), stored to d[token][row] in fp32.
// Pipeline: all 256 threads copy stage s + kStages - 2 (activations: TM rows x 64 k bf16 into a
// 128-byte-swizzled K-major tile, as wgmma reads it; weights: 128 rows x 32 packed bytes) with
// cp.async while stage s is decoded and multiplied; the raw block scales travel in registers,
// loaded three stages ahead. Decoding: for k16 step j the wgmma A fragment of lane (g, t) holds
// rows g / g + 8 at k = 16 j + 2t, 2t + 1 (one packed byte) and 16 j + 2t + 8, + 9 (another), so
// each fragment register is one byte of the row's packed words: prmt picks it, a multiply by
// 4097 spreads its two nibbles to the two 16-bit halves, and the shifts/masks of the e2m1 ->
// bf16 placement follow; then the bf16x2 multiply by the block scale. Two register sets of A
// fragments alternate so that stage s + 1 is decoded while stage s's wgmmas run.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.hpp"
#include "cuda/smem_opt_in.hpp"
#include "cuda/w4_decode.cuh"
#include "cuda/w4_gemm.hpp"
#include "fusedmoe/error.hpp"

namespace fusedmoe::cuda {
namespace {

using namespace w4;

constexpr int kThreads = 256;   // two warpgroups
constexpr int kRowsPerCta = 128;  // weight rows (64 per warpgroup)
constexpr int kBK = 64;          // k per stage: one 128-byte swizzle row of bf16 activations
constexpr int kWPitch = 48;      // bytes per weight row per stage (32 used; 48: the 8 rows a warp reads hit distinct banks)

template <int TM>
struct Cfg {
  static constexpr int kStages = TM >= 128 ? 6 : 8;
  static constexpr int kBBytes = TM * 128;                 // activation tile of a stage
  static constexpr int kWBytes = kRowsPerCta * kWPitch;    // weight tile of a stage
  static constexpr int kSmem = kStages * (kBBytes + kWBytes) + 1024;  // + alignment slack
};

struct Params {
  const uint8_t* w;
  const void* scale;
  const uint16_t* a;
  float* d;
  int64_t n, k;
  int groups;
  const int32_t* offsets;
  bool swizzled;
};

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
// cp.async writes through the generic proxy; wgmma reads shared memory through the async proxy.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Shared-memory matrix descriptor of a K-major bf16 tile with 128-byte rows in the 128-byte
// swizzle (8-row groups 1024 bytes apart; the tile starts 1024-byte aligned, the k16 step adds
// 32 bytes to the start address).
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(1) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

// D[64 x 128] += A[64 x 16] (registers, bf16) x B[16 x 128] (shared memory, K-major, bf16).
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
}

// D[64 x 64] += A[64 x 16] (registers, bf16) x B[16 x 64] (shared memory, K-major, bf16).
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
}

template <int N>
__device__ __forceinline__ void fence_operand(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ void fence_regs(uint32_t (&r)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

template <int TM>
__device__ __forceinline__ void wgmma_tile(float (&d)[TM / 2], const uint32_t (&a)[4], uint64_t desc) {
  if constexpr (TM == 128) wgmma_m64n128k16(d, a, desc);
  else wgmma_m64n64k16(d, a, desc);
}

// The a-th token tile (TM rows) over the experts that have rows, in expert order: its expert and
// tile index inside the expert, or e = -1 past the last tile. Block-wide (every thread calls it):
// kThreads experts per step, tile counts prefix-summed across the block.
template <int TM>
__device__ __forceinline__ void find_tile(const int32_t* offsets, int groups, int a, int& e_out, int& tile_out) {
  __shared__ int warp_sums[kThreads / 32];
  __shared__ int found_e, found_tile;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (threadIdx.x == 0) found_e = -1;
  int seen = 0;
  for (int base = 0; base < groups; base += kThreads) {
    const int e = base + static_cast<int>(threadIdx.x);
    const int tiles = e < groups ? (__ldcg(offsets + e + 1) - __ldcg(offsets + e) + TM - 1) / TM : 0;
    int incl = tiles;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int y = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= d) incl += y;
    }
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    int before = seen, total = seen;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) {
      if (w < warp) before += warp_sums[w];
      total += warp_sums[w];
    }
    const int first = before + incl - tiles;
    if (tiles > 0 && a >= first && a < first + tiles) {
      found_e = e;
      found_tile = a - first;
    }
    __syncthreads();
    if (total > a) break;  // uniform
    seen = total;
  }
  e_out = found_e;
  tile_out = found_tile;
}

// Raw block scales of one row for a 64-wide k stage: MXFP4 2 e8m0 bytes, NVFP4 4 e4m3 bytes,
// contiguous in both layouts (linear: k % 64 == 0 keeps them aligned; 128x4 swizzled: the 4
// columns of a k group are adjacent bytes).
template <int F>
__device__ __forceinline__ uint32_t load_stage_scales(const Params& p, int64_t e, int64_t row, int64_t s) {
  constexpr int kBs = F == kMx ? 32 : 16, kPer = kBK / kBs;
  const int64_t cols = p.k / kBs, b = s * kPer;
  const uint8_t* base = static_cast<const uint8_t*>(p.scale);
  const uint8_t* src = p.swizzled
                           ? base + e * (((p.n + 127) / 128 * 128) * ((cols + 3) / 4 * 4)) + swizzled_offset(row, b, cols)
                           : base + (e * p.n + row) * cols + b;
  if constexpr (F == kMx) return __ldg(reinterpret_cast<const uint16_t*>(src));
  else return __ldg(reinterpret_cast<const uint32_t*>(src));
}

// Byte `t` of `word` (two e2m1 codes) -> bf16x2 bits of value x 2^-126 (low code in the low half).
__device__ __forceinline__ uint32_t e2m1_byte_pair(uint32_t word, uint32_t sel) {
  const uint32_t y = prmt(word, 0u, sel);   // the byte alone
  const uint32_t s = y * 4097u;              // low code at bits 0..3, high code at bits 16..19
  return ((s << 6) & 0x01C001C0u) | ((s << 12) & 0x80008000u);
}

template <int F, int TM>
__global__ void __launch_bounds__(kThreads, 1) w4_wgmma_kernel(Params p) {
  chain_wait();
  using C = Cfg<TM>;
  constexpr int S = C::kStages;
  extern __shared__ uint8_t smem_raw[];
  int e, tile;
  find_tile<TM>(p.offsets, p.groups, static_cast<int>(blockIdx.y), e, tile);
  if (e < 0) return;
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t sb_addr = (raw_addr + 1023u) & ~1023u;          // activation tiles (1024-aligned)
  const uint32_t sw_addr = sb_addr + S * C::kBBytes;              // weight tiles
  const uint8_t* sw = smem_raw + (sw_addr - raw_addr);

  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kRowsPerCta;
  const int64_t row0 = p.offsets[e] + static_cast<int64_t>(tile) * TM;
  const int rows = static_cast<int>(min(static_cast<int64_t>(TM), static_cast<int64_t>(p.offsets[e + 1]) - row0));
  const int64_t half_k = p.k / 2, nk = p.k / kBK;
  const uint8_t* we = p.w + static_cast<int64_t>(e) * p.n * half_k;

  auto issue = [&](int64_t s) {
    if (s < nk) {
      const int buf = static_cast<int>(s % S);
#pragma unroll
      for (int i = 0; i < TM * 8 / kThreads; ++i) {  // activations: TM rows x 8 chunks of 16 bytes
        const int piece = tid + kThreads * i, r = piece >> 3, c = piece & 7;
        const bool ok = r < rows;
        const uint16_t* src = ok ? p.a + (row0 + r) * p.k + s * kBK + c * 8 : p.a;
        cp_async16(sb_addr + buf * C::kBBytes + r * 128 + ((c ^ (r & 7)) << 4), src, ok);
      }
      {  // weights: 128 rows x 2 chunks of 16 bytes
        const int r = tid >> 1, c = tid & 1;
        const bool ok = n0 + r < p.n;
        const uint8_t* src = ok ? we + (n0 + r) * half_k + s * (kBK / 2) + c * 16 : p.w;
        cp_async16(sw_addr + buf * C::kWBytes + r * kWPitch + c * 16, src, ok);
      }
    }
    cp_async_commit();  // always a group, maybe empty: the wait counts stay uniform
  };

  // This thread's weight rows (A fragment rows g and g + 8 of its warp's 16).
  const int lrow = wg * 64 + warp * 16 + g;
  const int64_t r_lo = n0 + lrow, r_hi = r_lo + 8;
  auto scales = [&](int64_t s, uint32_t& lo, uint32_t& hi) {
    lo = s < nk && r_lo < p.n ? load_stage_scales<F>(p, e, r_lo, s) : 0u;
    hi = s < nk && r_hi < p.n ? load_stage_scales<F>(p, e, r_hi, s) : 0u;
  };

  float acc[TM / 2];
#pragma unroll
  for (int i = 0; i < TM / 2; ++i) acc[i] = 0.0f;

#pragma unroll
  for (int s = 0; s < S - 2; ++s) issue(s);
  uint32_t sc0[2], sc1[2], sc2[2];  // raw scales of stages s, s + 1, s + 2
  scales(0, sc0[0], sc0[1]);
  scales(1, sc1[0], sc1[1]);
  scales(2, sc2[0], sc2[1]);
  const uint32_t sel = 0x4440u | static_cast<uint32_t>(t);

  uint32_t A[4][4];  // the A fragments of the stage's four k16 steps
  for (int64_t s = 0; s < nk; ++s) {
    // One wgmma group per k16 step: at most 3 in flight here means stage s - 1's first one is
    // done, so every wgmma of stage s - 2 is (its buffer is refilled below) ...
    wgmma_wait<3>();
    cp_async_wait<S - 3>();  // this thread's copies of stage s have landed
    fence_proxy_async();
    __syncthreads();         // ... everyone's copies, and both warpgroups are past stage s - 2
    issue(s + S - 2);        // into the buffer of stage s - 2
    // Rows lrow / lrow + 8: 32 packed bytes each = 8 words (k16 step j: words 2j, 2j + 1).
    const uint8_t* wrow = sw + (s % S) * C::kWBytes + lrow * kWPitch;
    const uint4 l0 = *reinterpret_cast<const uint4*>(wrow), l1 = *reinterpret_cast<const uint4*>(wrow + 16);
    const uint4 h0 = *reinterpret_cast<const uint4*>(wrow + 8 * kWPitch);
    const uint4 h1 = *reinterpret_cast<const uint4*>(wrow + 8 * kWPitch + 16);
    const uint32_t wl[8] = {l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w};
    const uint32_t wh[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
    const uint32_t b0 = sb_addr + (s % S) * C::kBBytes;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      wgmma_wait<3>();  // the wgmma that read A[j] (stage s - 1) is done
      // Block scale of k16 step j: MXFP4 block j / 2 (byte j / 2), NVFP4 block j (byte j).
      const int byte = F == kMx ? j / 2 : j;
      const uint32_t s_lo = scale_bits<F>((sc0[0] >> (8 * byte)) & 0xFFu);
      const uint32_t s_hi = scale_bits<F>((sc0[1] >> (8 * byte)) & 0xFFu);
      A[j][0] = bf16x2_mul(e2m1_byte_pair(wl[2 * j], sel), s_lo);
      A[j][1] = bf16x2_mul(e2m1_byte_pair(wh[2 * j], sel), s_hi);
      A[j][2] = bf16x2_mul(e2m1_byte_pair(wl[2 * j + 1], sel), s_lo);
      A[j][3] = bf16x2_mul(e2m1_byte_pair(wh[2 * j + 1], sel), s_hi);
      fence_regs(A[j]);  // the decode stays before the fence (register-only code could sink past it)
      fence_operand(acc);
      wgmma_fence();
      wgmma_tile<TM>(acc, A[j], smem_desc(b0 + 32 * j));
      wgmma_commit();
      fence_operand(acc);
    }
    sc0[0] = sc1[0];
    sc0[1] = sc1[1];
    sc1[0] = sc2[0];
    sc1[1] = sc2[1];
    scales(s + 3, sc2[0], sc2[1]);
  }
  wgmma_wait<0>();
  fence_operand(acc);
  cp_async_wait<0>();

  // D fragment (m64nTM): acc[4 j + q] = (row lrow + 8 (q >= 2), token 8 j + 2 t + (q & 1)).
  constexpr float kOut = static_cast<float>(1 << kE2m1Shift);
#pragma unroll
  for (int j = 0; j < TM / 8; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int64_t col = (q >= 2 ? r_hi : r_lo);
      const int tok = 8 * j + 2 * t + (q & 1);
      if (col < p.n && tok < rows) p.d[(row0 + tok) * p.n + col] = acc[4 * j + q] * kOut;
    }
}

template <int F, int TM>
void launch(const Params& p, int64_t max_rows, cudaStream_t stream) {
  constexpr int smem = Cfg<TM>::kSmem;
  opt_in_dynamic_smem<w4_wgmma_kernel<F, TM>>(smem);
  const int64_t active = std::min<int64_t>(max_rows, p.groups);
  const int64_t tiles = (max_rows + TM - 1) / TM + active;  // >= the sum over experts of ceil(rows / TM)
  if (tiles > 65535) throw Error("w4 wgmma GEMM: " + std::to_string(max_rows) + " rows need more token tiles than a grid holds");
  const dim3 grid(static_cast<unsigned>((p.n + kRowsPerCta - 1) / kRowsPerCta), static_cast<unsigned>(tiles));
  launch_chained(w4_wgmma_kernel<F, TM>, grid, dim3(kThreads), smem, stream, p);
}

}  // namespace

bool w4_wgmma_shape_ok(const W4Weights& w) {
  return (w.format == Format::MXFP4 || w.format == Format::NVFP4) && w.k % kBK == 0 && w.k > 0 && w.n > 0 &&
         reinterpret_cast<uintptr_t>(w.w) % 16 == 0 && reinterpret_cast<uintptr_t>(w.scale) % 4 == 0;
}

void w4_wgmma_grouped_gemm(const W4Weights& w, const void* a, float* d, int groups, const int32_t* offsets,
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
  const int tm = w4_wgmma_token_tile(max_rows, groups);
  if (tm != 64 && tm != 128) throw Error("w4 wgmma GEMM: token tile " + std::to_string(tm) + " (64 or 128)");
  if (w.format == Format::MXFP4) {
    if (tm == 128) launch<kMx, 128>(p, max_rows, stream);
    else launch<kMx, 64>(p, max_rows, stream);
  } else {
    if (tm == 128) launch<kNv, 128>(p, max_rows, stream);
    else launch<kNv, 64>(p, max_rows, stream);
  }
}

}  // namespace fusedmoe::cuda
