// 4-bit weight grouped GEMM on Hopper's wgmma (MXFP4 / NVFP4 weights, bf16 operand), for many
// tokens per expert: the weights are decoded inside the mainloop, so each packed byte is read
// from memory once per token tile instead of being decoded to a 16-bit copy in the workspace and
// read back (the dequant way, w4_gemm.hpp). Numerics are the dequant way's: every e2m1 x block
// scale product is an exact bf16 value (w4_decode.cuh), fp32 accumulation in the tensor cores.
//
// Tile: a CTA of two warpgroups owns 128 weight rows (64 per warpgroup, the wgmma M side) and up
// to 256 tokens of one expert (the wgmma N side, two halves of 128) - swap-AB, so the weights are
// the register-sourced operand A and the activations the shared-memory operand B, and D is the
// transposed output tile (weight rows x tokens), stored to d[token][row] in fp32. Each half runs
// a wgmma of N = 32, 64 or 128, the fewest that hold its rows (the kPair instances: one wgmma of
// N = 128 + N1 for both halves): an expert with 140 rows costs 128 + 32 tokens of MMA and one weight decode (with 128-token tiles it took two CTAs, each
// decoding the weights: the decode, not the MMA, bounds this kernel's instruction issue). Where
// experts hold 249..288 rows on average the kPairWide instance tiles by 288 tokens (a third wgmma of
// N = 32 on the same fragments), so those experts also take one tile, not 256 plus a few.
// Pipeline: all 256 threads copy stage s + kStages - 2 (activations: 256 rows x 64 k bf16 into a
// 128-byte-swizzled K-major tile, as wgmma reads it; weights: 128 rows x 32 packed bytes) with
// cp.async while stage s is decoded and multiplied; the raw block scales travel in registers,
// loaded three stages ahead. Decoding: the activations come in this kernel's k order
// (w4_kperm.cuh: the gather / activation kernels store them so), in which the wgmma A fragment of
// lane (g, t) at k16 step j is codes j and j + 4 of the lane's packed words 2t (registers 0 / 1,
// rows g / g + 8) and 2t + 1 (registers 2 / 3): a mask and one multiply place both codes' e2m1 ->
// bf16 bits in the two halves (codes 2, 3 after a shift of the word), then the bf16x2 multiply by
// the block scale, one per lane and row for the whole stage. (With the operand in natural order,
// a register was one byte of the row: a byte select and a multiply spreading its two nibbles
// came first, and two or four scales per stage: 229-242 instructions per stage and warp against
// 185-199 now.) The fragments of step j are decoded while the wgmmas of the steps before it run
// (one commit group per k16 step).
//
// Outputs (W4Out): fp32 D (y stays fp32 for the 4-bit formats: docs/NUMERICS.md; a bf16 y was
// measured again on 2026-11-26, 1-4% of layer time, and not kept:
// bench/results/2026-11-26-h100-w4-d16-pairs), or GEMM1 with the gated activation in the
// epilogue (kAct): a CTA then owns 64 activation outputs, its local weight row 16 b + i being
// output 8 b + i % 8's gate row (i < 8) or up row (i >= 8), so a thread's A fragment rows g and
// g + 8 are the gate and up sums of one output and the activation runs in registers. It stores
// GEMM2's bf16 operand (no quantisation) or, for per-token fp8 and nvfp4 activations, the bf16
// rows a quantise-only pass reads (no fp32 h, no activation kernel). The epilogue and the row
// mapping: w4_act_epilogue.cuh.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.hpp"
#include "cuda/env_switch.hpp"
#include "cuda/smem_opt_in.hpp"
#include "cuda/w4_act_epilogue.cuh"
#include "cuda/w4_decode.cuh"
#include "cuda/w4_gemm.hpp"
#include "cuda/w4_kperm.cuh"
#include "cuda/wgmma_util.cuh"
#include "fusedmoe/error.hpp"

namespace fusedmoe::cuda {
namespace {

using namespace w4;
using namespace wg;

constexpr int kThreads = 256;   // two warpgroups (also the 256 entries of the scale table, one per thread)
constexpr int kRowsPerCta = 128;  // weight rows (64 per warpgroup)
constexpr int kBK = 64;          // k per stage: one 128-byte swizzle row of bf16 activations
constexpr int kWPitch = 32;      // bytes per weight row per stage: a half-warp's 8-byte fragment loads (4 rows x 4 lanes) hit 32 distinct banks

constexpr int kStages = 5;
constexpr int kWBytes = kRowsPerCta * kWPitch;    // weight tile of a stage
constexpr int kLutBytes = 256 * 4;                  // scale code -> bf16x2 multiplier (scale_bits)
// Shared memory of an instance: kStages activation tiles (tokens x 128 bytes) and weight tiles, the
// scale table, alignment slack.
constexpr int smem_bytes(int tm) { return kStages * (tm * 128 + kWBytes) + kLutBytes + 1024; }

enum class W4Out { F32, ACT };

struct Params {
  const uint8_t* w;
  const void* scale;
  const uint16_t* a;
  void* d;  // F32: float [rows, n]; ACT: bf16 activation rows [rows, N] or null (output to act.out)
  int64_t n, k;  // n: weight rows (ACT: 2N)
  int groups;
  const int32_t* offsets;
  bool swizzled;
  ActivationParams act;  // ACT: the activation; its output goes to act.out unless d is set
  uint32_t place0 = 0x1040u, place1 = 0x104u;  // e2m1_nibble_pair's multipliers (why they are parameters: there)
  bool d_staged = false;  // the staged epilogue's 16-byte row stores: 16-byte aligned rows and output (make_params / the ACT launch)
};

// D[64 x 128] += A[64 x 16] (registers, bf16) x B[16 x 128] (shared memory, K-major, bf16): d[0 .. 64).
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
}

// D[64 x 64] += A[64 x 16] (registers, bf16) x B[16 x 64] (shared memory, K-major, bf16): d[0 .. 32).
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[64], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
}

// D[64 x 32] += A[64 x 16] (registers, bf16) x B[16 x 32] (shared memory, K-major, bf16): d[0 .. 16)
// (kPairWide's third part passes a 16-float accumulator: only those registers live).
template <int kAcc>
__device__ __forceinline__ void wgmma_m64n32k16(float (&d)[kAcc], const uint32_t (&a)[4], uint64_t desc) {
  static_assert(kAcc >= 16, "16 accumulators per thread");
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, %20, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
}

// One half of the token tile: N = 32, 64 or 128 tokens (the fewest that hold its rows), so a
// half with a few rows costs a small wgmma, not a full one. N is a template argument: the CTA
// picks its mainloop instance once (w4_wgmma_kernel), so no k16 step branches on it (with a
// runtime N every step ran 5-6 extra branch / arrive instructions per half).
template <int N>
__device__ __forceinline__ void wgmma_half(float (&d)[64], const uint32_t (&a)[4], uint64_t desc) {
  if constexpr (N == 128) wgmma_m64n128k16(d, a, desc);
  else if constexpr (N == 64) wgmma_m64n64k16(d, a, desc);
  else wgmma_m64n32k16(d, a, desc);
}
// Both token halves of a tile in one wgmma of N = 128 + N1 (160 / 192 / 256; kPair instances): the stage's
// activation rows are contiguous across the halves (row r at r x 128 bytes) and the m64nNk16 D fragment is
// acc0's then the first N1 / 2 values of acc1 (8-column blocks in order).
template <int N1>
__device__ __forceinline__ void wgmma_pair(float (&d0)[64], float (&d1)[64], const uint32_t (&a)[4], uint64_t desc);
template <>
__device__ __forceinline__ void wgmma_pair<32>(float (&d0)[64], float (&d1)[64], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %85, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n160k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79}, {%80,%81,%82,%83}, %84, p, 1, 1, 0;\n}\n"
      : "+f"(d0[0]), "+f"(d0[1]), "+f"(d0[2]), "+f"(d0[3]), "+f"(d0[4]), "+f"(d0[5]), "+f"(d0[6]), "+f"(d0[7]), "+f"(d0[8]), "+f"(d0[9]), "+f"(d0[10]), "+f"(d0[11]), "+f"(d0[12]), "+f"(d0[13]), "+f"(d0[14]), "+f"(d0[15]), "+f"(d0[16]), "+f"(d0[17]), "+f"(d0[18]), "+f"(d0[19]), "+f"(d0[20]), "+f"(d0[21]), "+f"(d0[22]), "+f"(d0[23]), "+f"(d0[24]), "+f"(d0[25]), "+f"(d0[26]), "+f"(d0[27]), "+f"(d0[28]), "+f"(d0[29]), "+f"(d0[30]), "+f"(d0[31]), "+f"(d0[32]), "+f"(d0[33]), "+f"(d0[34]), "+f"(d0[35]), "+f"(d0[36]), "+f"(d0[37]), "+f"(d0[38]), "+f"(d0[39]), "+f"(d0[40]), "+f"(d0[41]), "+f"(d0[42]), "+f"(d0[43]), "+f"(d0[44]), "+f"(d0[45]), "+f"(d0[46]), "+f"(d0[47]), "+f"(d0[48]), "+f"(d0[49]), "+f"(d0[50]), "+f"(d0[51]), "+f"(d0[52]), "+f"(d0[53]), "+f"(d0[54]), "+f"(d0[55]), "+f"(d0[56]), "+f"(d0[57]), "+f"(d0[58]), "+f"(d0[59]), "+f"(d0[60]), "+f"(d0[61]), "+f"(d0[62]), "+f"(d0[63]), "+f"(d1[0]), "+f"(d1[1]), "+f"(d1[2]), "+f"(d1[3]), "+f"(d1[4]), "+f"(d1[5]), "+f"(d1[6]), "+f"(d1[7]), "+f"(d1[8]), "+f"(d1[9]), "+f"(d1[10]), "+f"(d1[11]), "+f"(d1[12]), "+f"(d1[13]), "+f"(d1[14]), "+f"(d1[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_pair<64>(float (&d0)[64], float (&d1)[64], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %101, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95}, {%96,%97,%98,%99}, %100, p, 1, 1, 0;\n}\n"
      : "+f"(d0[0]), "+f"(d0[1]), "+f"(d0[2]), "+f"(d0[3]), "+f"(d0[4]), "+f"(d0[5]), "+f"(d0[6]), "+f"(d0[7]), "+f"(d0[8]), "+f"(d0[9]), "+f"(d0[10]), "+f"(d0[11]), "+f"(d0[12]), "+f"(d0[13]), "+f"(d0[14]), "+f"(d0[15]), "+f"(d0[16]), "+f"(d0[17]), "+f"(d0[18]), "+f"(d0[19]), "+f"(d0[20]), "+f"(d0[21]), "+f"(d0[22]), "+f"(d0[23]), "+f"(d0[24]), "+f"(d0[25]), "+f"(d0[26]), "+f"(d0[27]), "+f"(d0[28]), "+f"(d0[29]), "+f"(d0[30]), "+f"(d0[31]), "+f"(d0[32]), "+f"(d0[33]), "+f"(d0[34]), "+f"(d0[35]), "+f"(d0[36]), "+f"(d0[37]), "+f"(d0[38]), "+f"(d0[39]), "+f"(d0[40]), "+f"(d0[41]), "+f"(d0[42]), "+f"(d0[43]), "+f"(d0[44]), "+f"(d0[45]), "+f"(d0[46]), "+f"(d0[47]), "+f"(d0[48]), "+f"(d0[49]), "+f"(d0[50]), "+f"(d0[51]), "+f"(d0[52]), "+f"(d0[53]), "+f"(d0[54]), "+f"(d0[55]), "+f"(d0[56]), "+f"(d0[57]), "+f"(d0[58]), "+f"(d0[59]), "+f"(d0[60]), "+f"(d0[61]), "+f"(d0[62]), "+f"(d0[63]), "+f"(d1[0]), "+f"(d1[1]), "+f"(d1[2]), "+f"(d1[3]), "+f"(d1[4]), "+f"(d1[5]), "+f"(d1[6]), "+f"(d1[7]), "+f"(d1[8]), "+f"(d1[9]), "+f"(d1[10]), "+f"(d1[11]), "+f"(d1[12]), "+f"(d1[13]), "+f"(d1[14]), "+f"(d1[15]), "+f"(d1[16]), "+f"(d1[17]), "+f"(d1[18]), "+f"(d1[19]), "+f"(d1[20]), "+f"(d1[21]), "+f"(d1[22]), "+f"(d1[23]), "+f"(d1[24]), "+f"(d1[25]), "+f"(d1[26]), "+f"(d1[27]), "+f"(d1[28]), "+f"(d1[29]), "+f"(d1[30]), "+f"(d1[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_pair<128>(float (&d0)[64], float (&d1)[64], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, {%128,%129,%130,%131}, %132, p, 1, 1, 0;\n}\n"
      : "+f"(d0[0]), "+f"(d0[1]), "+f"(d0[2]), "+f"(d0[3]), "+f"(d0[4]), "+f"(d0[5]), "+f"(d0[6]), "+f"(d0[7]), "+f"(d0[8]), "+f"(d0[9]), "+f"(d0[10]), "+f"(d0[11]), "+f"(d0[12]), "+f"(d0[13]), "+f"(d0[14]), "+f"(d0[15]), "+f"(d0[16]), "+f"(d0[17]), "+f"(d0[18]), "+f"(d0[19]), "+f"(d0[20]), "+f"(d0[21]), "+f"(d0[22]), "+f"(d0[23]), "+f"(d0[24]), "+f"(d0[25]), "+f"(d0[26]), "+f"(d0[27]), "+f"(d0[28]), "+f"(d0[29]), "+f"(d0[30]), "+f"(d0[31]), "+f"(d0[32]), "+f"(d0[33]), "+f"(d0[34]), "+f"(d0[35]), "+f"(d0[36]), "+f"(d0[37]), "+f"(d0[38]), "+f"(d0[39]), "+f"(d0[40]), "+f"(d0[41]), "+f"(d0[42]), "+f"(d0[43]), "+f"(d0[44]), "+f"(d0[45]), "+f"(d0[46]), "+f"(d0[47]), "+f"(d0[48]), "+f"(d0[49]), "+f"(d0[50]), "+f"(d0[51]), "+f"(d0[52]), "+f"(d0[53]), "+f"(d0[54]), "+f"(d0[55]), "+f"(d0[56]), "+f"(d0[57]), "+f"(d0[58]), "+f"(d0[59]), "+f"(d0[60]), "+f"(d0[61]), "+f"(d0[62]), "+f"(d0[63]), "+f"(d1[0]), "+f"(d1[1]), "+f"(d1[2]), "+f"(d1[3]), "+f"(d1[4]), "+f"(d1[5]), "+f"(d1[6]), "+f"(d1[7]), "+f"(d1[8]), "+f"(d1[9]), "+f"(d1[10]), "+f"(d1[11]), "+f"(d1[12]), "+f"(d1[13]), "+f"(d1[14]), "+f"(d1[15]), "+f"(d1[16]), "+f"(d1[17]), "+f"(d1[18]), "+f"(d1[19]), "+f"(d1[20]), "+f"(d1[21]), "+f"(d1[22]), "+f"(d1[23]), "+f"(d1[24]), "+f"(d1[25]), "+f"(d1[26]), "+f"(d1[27]), "+f"(d1[28]), "+f"(d1[29]), "+f"(d1[30]), "+f"(d1[31]), "+f"(d1[32]), "+f"(d1[33]), "+f"(d1[34]), "+f"(d1[35]), "+f"(d1[36]), "+f"(d1[37]), "+f"(d1[38]), "+f"(d1[39]), "+f"(d1[40]), "+f"(d1[41]), "+f"(d1[42]), "+f"(d1[43]), "+f"(d1[44]), "+f"(d1[45]), "+f"(d1[46]), "+f"(d1[47]), "+f"(d1[48]), "+f"(d1[49]), "+f"(d1[50]), "+f"(d1[51]), "+f"(d1[52]), "+f"(d1[53]), "+f"(d1[54]), "+f"(d1[55]), "+f"(d1[56]), "+f"(d1[57]), "+f"(d1[58]), "+f"(d1[59]), "+f"(d1[60]), "+f"(d1[61]), "+f"(d1[62]), "+f"(d1[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
}

// N1 = 8 / 16 / 24 (m64n136 / n144 / n152): the kPairFine instance's second halves of 1..24 rows.
template <>
__device__ __forceinline__ void wgmma_pair<8>(float (&d0)[64], float (&d1)[64], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %73, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n136k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67}, {%68,%69,%70,%71}, %72, p, 1, 1, 0;\n}\n"
      : "+f"(d0[0]), "+f"(d0[1]), "+f"(d0[2]), "+f"(d0[3]), "+f"(d0[4]), "+f"(d0[5]), "+f"(d0[6]), "+f"(d0[7]), "+f"(d0[8]), "+f"(d0[9]), "+f"(d0[10]), "+f"(d0[11]), "+f"(d0[12]), "+f"(d0[13]), "+f"(d0[14]), "+f"(d0[15]), "+f"(d0[16]), "+f"(d0[17]), "+f"(d0[18]), "+f"(d0[19]), "+f"(d0[20]), "+f"(d0[21]), "+f"(d0[22]), "+f"(d0[23]), "+f"(d0[24]), "+f"(d0[25]), "+f"(d0[26]), "+f"(d0[27]), "+f"(d0[28]), "+f"(d0[29]), "+f"(d0[30]), "+f"(d0[31]), "+f"(d0[32]), "+f"(d0[33]), "+f"(d0[34]), "+f"(d0[35]), "+f"(d0[36]), "+f"(d0[37]), "+f"(d0[38]), "+f"(d0[39]), "+f"(d0[40]), "+f"(d0[41]), "+f"(d0[42]), "+f"(d0[43]), "+f"(d0[44]), "+f"(d0[45]), "+f"(d0[46]), "+f"(d0[47]), "+f"(d0[48]), "+f"(d0[49]), "+f"(d0[50]), "+f"(d0[51]), "+f"(d0[52]), "+f"(d0[53]), "+f"(d0[54]), "+f"(d0[55]), "+f"(d0[56]), "+f"(d0[57]), "+f"(d0[58]), "+f"(d0[59]), "+f"(d0[60]), "+f"(d0[61]), "+f"(d0[62]), "+f"(d0[63]), "+f"(d1[0]), "+f"(d1[1]), "+f"(d1[2]), "+f"(d1[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_pair<16>(float (&d0)[64], float (&d1)[64], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %77, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n144k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71}, {%72,%73,%74,%75}, %76, p, 1, 1, 0;\n}\n"
      : "+f"(d0[0]), "+f"(d0[1]), "+f"(d0[2]), "+f"(d0[3]), "+f"(d0[4]), "+f"(d0[5]), "+f"(d0[6]), "+f"(d0[7]), "+f"(d0[8]), "+f"(d0[9]), "+f"(d0[10]), "+f"(d0[11]), "+f"(d0[12]), "+f"(d0[13]), "+f"(d0[14]), "+f"(d0[15]), "+f"(d0[16]), "+f"(d0[17]), "+f"(d0[18]), "+f"(d0[19]), "+f"(d0[20]), "+f"(d0[21]), "+f"(d0[22]), "+f"(d0[23]), "+f"(d0[24]), "+f"(d0[25]), "+f"(d0[26]), "+f"(d0[27]), "+f"(d0[28]), "+f"(d0[29]), "+f"(d0[30]), "+f"(d0[31]), "+f"(d0[32]), "+f"(d0[33]), "+f"(d0[34]), "+f"(d0[35]), "+f"(d0[36]), "+f"(d0[37]), "+f"(d0[38]), "+f"(d0[39]), "+f"(d0[40]), "+f"(d0[41]), "+f"(d0[42]), "+f"(d0[43]), "+f"(d0[44]), "+f"(d0[45]), "+f"(d0[46]), "+f"(d0[47]), "+f"(d0[48]), "+f"(d0[49]), "+f"(d0[50]), "+f"(d0[51]), "+f"(d0[52]), "+f"(d0[53]), "+f"(d0[54]), "+f"(d0[55]), "+f"(d0[56]), "+f"(d0[57]), "+f"(d0[58]), "+f"(d0[59]), "+f"(d0[60]), "+f"(d0[61]), "+f"(d0[62]), "+f"(d0[63]), "+f"(d1[0]), "+f"(d1[1]), "+f"(d1[2]), "+f"(d1[3]), "+f"(d1[4]), "+f"(d1[5]), "+f"(d1[6]), "+f"(d1[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_pair<24>(float (&d0)[64], float (&d1)[64], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %81, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n152k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75}, {%76,%77,%78,%79}, %80, p, 1, 1, 0;\n}\n"
      : "+f"(d0[0]), "+f"(d0[1]), "+f"(d0[2]), "+f"(d0[3]), "+f"(d0[4]), "+f"(d0[5]), "+f"(d0[6]), "+f"(d0[7]), "+f"(d0[8]), "+f"(d0[9]), "+f"(d0[10]), "+f"(d0[11]), "+f"(d0[12]), "+f"(d0[13]), "+f"(d0[14]), "+f"(d0[15]), "+f"(d0[16]), "+f"(d0[17]), "+f"(d0[18]), "+f"(d0[19]), "+f"(d0[20]), "+f"(d0[21]), "+f"(d0[22]), "+f"(d0[23]), "+f"(d0[24]), "+f"(d0[25]), "+f"(d0[26]), "+f"(d0[27]), "+f"(d0[28]), "+f"(d0[29]), "+f"(d0[30]), "+f"(d0[31]), "+f"(d0[32]), "+f"(d0[33]), "+f"(d0[34]), "+f"(d0[35]), "+f"(d0[36]), "+f"(d0[37]), "+f"(d0[38]), "+f"(d0[39]), "+f"(d0[40]), "+f"(d0[41]), "+f"(d0[42]), "+f"(d0[43]), "+f"(d0[44]), "+f"(d0[45]), "+f"(d0[46]), "+f"(d0[47]), "+f"(d0[48]), "+f"(d0[49]), "+f"(d0[50]), "+f"(d0[51]), "+f"(d0[52]), "+f"(d0[53]), "+f"(d0[54]), "+f"(d0[55]), "+f"(d0[56]), "+f"(d0[57]), "+f"(d0[58]), "+f"(d0[59]), "+f"(d0[60]), "+f"(d0[61]), "+f"(d0[62]), "+f"(d0[63]), "+f"(d1[0]), "+f"(d1[1]), "+f"(d1[2]), "+f"(d1[3]), "+f"(d1[4]), "+f"(d1[5]), "+f"(d1[6]), "+f"(d1[7]), "+f"(d1[8]), "+f"(d1[9]), "+f"(d1[10]), "+f"(d1[11])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
}

template <int V>
using IntC = std::integral_constant<int, V>;
__device__ __forceinline__ int half_n(int rows) { return rows > 64 ? 128 : (rows > 32 ? 64 : 32); }

// Codes j and j + 4 of `word` (eight e2m1 codes, code i at bits 4 i) -> bf16x2 bits of value x
// 2^-126 (code j in the low half), given sh = word >> 8 (codes 2, 3 / 6, 7 at the places of 0, 1 /
// 4, 5): both codes masked at the same place of each half, one multiply puts the magnitude at bits
// 6..8 and the sign at bit 15 of each half (x 0x1040 for codes at bits 0..3, x 0x104 at bits
// 4..7), one mask. The two multipliers come from the kernel parameters (Params::place0 / place1):
// as literals ptxas turned such multiplies into LEA (shift + add) in some instances, an ALU
// instruction next to the LOP3 / SHF the decode already issues there, where IMAD runs on the FMA
// pipe (the byte-pick decode before it: same instruction count, 16 IMADs as LEAs, 9% longer; ncu:
// math-pipe-throttle stalls doubled; bench/results/2026-11-26-h200-w4-gemm1-act/ncu).
// j is a constant after the k16 loop's unrolling.
__device__ __forceinline__ uint32_t e2m1_nibble_pair(int j, uint32_t word, uint32_t sh, uint32_t place0,
                                                     uint32_t place1) {
  const uint32_t x = j < 2 ? word : sh;
  return j % 2 == 0 ? ((x & 0x000F000Fu) * place0) & 0x81C081C0u : ((x & 0x00F000F0u) * place1) & 0x81C081C0u;
}

// The staged epilogues' tail (fp32 D and GEMM1's bf16 activation): the [token][pitch] tile in
// shared memory (written by every thread before this) copied out by 16-byte loads and stores, kL
// lanes per token row (bytes <= 16 kL, a multiple of 16), 32 / kL rows per warp step. Until
// 2026-11-28 this was one cp.async.bulk per token row, thread t issuing row t's: the bulk copy
// takes its operands in uniform registers, so every warp issued its 32 copies one lane after the
// other (a loop of R2UR + UBLKCP waiting on each), ~11% of the fp32 GEMM's warp samples at
// Qwen3-30B-A3B 4096 tokens (ncu, bench/results/2026-11-28-h100-w4-ws/ncu). Not inlined: inlined,
// ptxas rescheduled the fp32 instances' k loops around it (noinline: the same loop lengths; the
// fused-activation instances' loops take ~9 more uniform moves per stage either way, and their
// GEMM1 still got 0.97-1.00x faster: bench/results/2026-11-28-h100-w4-store r2).
template <int kL, typename T>
__device__ __noinline__ void store_rows(T* dst_row0, int64_t ld, const T* st, int pitch, int rows, uint32_t bytes) {
  static_assert(kL >= 1 && kL <= 32 && 32 % kL == 0, "lanes per row");
  constexpr int kRowsPerStep = 32 / kL, kStep = kThreads / 32 * kRowsPerStep;
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, c = lane % kL;
  if (c * 16 >= static_cast<int>(bytes)) return;
#pragma unroll 4
  for (int r = warp * kRowsPerStep + lane / kL; r < rows; r += kStep) {
    const uint4 v = *reinterpret_cast<const uint4*>(reinterpret_cast<const uint8_t*>(st + r * pitch) + 16 * c);
    *reinterpret_cast<uint4*>(reinterpret_cast<uint8_t*>(dst_row0 + r * ld) + 16 * c) = v;
  }
}

// p is __grid_constant__ (the lambdas below take it by reference): layers on this kernel 0.92-0.99x
// the time of a plain parameter (H200 A/B, bench/results/2026-11-22-h200-w4-kernel-diet-ab section 8;
// on w4_mma_kernel the same change raised registers and spilled, and was not made).
// kPair: a tile's two token halves in one wgmma per k16 step (wgmma_pair) - kPairFull for full tiles only
// (both halves 128 tokens: m64n256k16), kPairAll for every tile with a second half (n160 / n192 / n256). Own
// instances, taken by the expected rows per expert (pair_mode): the change in the shared kernel moved the other
// width instances' k loops by 1.5-6% (ptxas schedules the six inlined mainloops together;
// bench/results/2026-11-28-h100-w4-wgmma-pair), and as noinline functions every instance was 1.1-1.3x slower
// (bench/results/2026-11-28-h100-w4-wgmma-tiles).
// kPairWide: kPairFull's pairing on 288-token tiles, whose rows 256..287 take a third wgmma of N = 32 sharing
// the decoded fragments: an expert with 257..288 rows (Qwen3-30B-A3B at 4096 tokens: 256 +- 16 rows, about
// half the experts) is one CTA per column tile instead of a full tile plus a 1..32-token tile that decodes
// every weight again.
// kPairFine: kPairAll's pairing with second halves of N1 = 8 .. 32 in steps of 8 (m64n136 .. m64n160), for
// experts of 129..160 rows (DeepSeek-V3 TP1 / gpt-oss-120b at 4096 tokens: 128 +- 11), whose n160 wgmma ran up to
// 24 tokens of zeros; rows <= 128 on (128, 0), rows past 160 on (128, 128).
constexpr int kPairNone = 0, kPairFull = 1, kPairAll = 2, kPairWide = 3, kPairFine = 4;
// Tokens per CTA tile: two halves of up to 128 (wgmma N), kPairWide's third part of up to 32.
constexpr int tile_tokens(int pair_mode) { return pair_mode == kPairWide ? 288 : 256; }
template <int F, W4Out O, int kPair = kPairNone>
__global__ void __launch_bounds__(kThreads, 1) w4_wgmma_kernel(const __grid_constant__ Params p) {
  chain_wait();
  constexpr bool kAct = O == W4Out::ACT;
  constexpr int S = kStages;
  constexpr int TM = tile_tokens(kPair);
  constexpr int kBBytes = TM * 128;  // activation tile of a stage (two 16 KB halves; kPairWide: + 4 KB)
  extern __shared__ uint8_t smem_raw[];
  int e, tile;
  find_tile<kThreads, TM>(p.offsets, p.groups, static_cast<int>(blockIdx.y), e, tile);
  if (e < 0) return;
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t sb_addr = (raw_addr + 1023u) & ~1023u;          // activation tiles (1024-aligned)
  const uint32_t sw_addr = sb_addr + S * kBBytes;              // weight tiles
  const uint8_t* sw = smem_raw + (sw_addr - raw_addr);
  // Every scale code's bf16x2 multiplier, looked up once per block and stage instead of converted
  // (8 instructions per e8m0 code, more per e4m3 one); the mainloop's first barrier orders it.
  uint32_t* lut = reinterpret_cast<uint32_t*>(smem_raw + (sw_addr - raw_addr) + S * kWBytes);
  static_assert(kThreads == 256, "one scale-table entry per thread");
  lut[threadIdx.x] = scale_bits<F>(threadIdx.x);

  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t = lane & 3;
  // kAct: the CTA's first activation output; else its first weight row.
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * (kAct ? kW4ActOutputsPerCta : kRowsPerCta);
  // Weight row of local row lr (0 when it has none: never stored); ok: it has one.
  auto weight_row = [&](int lr, bool& ok) -> int64_t {
    if constexpr (kAct) {
      return act_weight_row(p.act, n0, lr, ok);
    } else {
      ok = n0 + lr < p.n;
      return ok ? n0 + lr : 0;
    }
  };
  const int64_t row0 = p.offsets[e] + static_cast<int64_t>(tile) * TM;
  const int rows = static_cast<int>(min(static_cast<int64_t>(TM), static_cast<int64_t>(p.offsets[e + 1]) - row0));
  const int64_t half_k = p.k / 2;
  const int nk = static_cast<int>(p.k / kBK);  // stage counters in 32 bits (64-bit s % S cost ~25 uniform instructions per stage)
  const uint8_t* we = p.w + static_cast<int64_t>(e) * p.n * half_k;

  // Per-thread copy plan, fixed over the k loop (stage s adds s x 128 bytes of activations and
  // s x 32 bytes of weights): activation chunk (row r_i = tid / 8 + 32 i, 16-byte column
  // c = tid % 8) lands at r_i x 128 + (c ^ (r_i % 8)) x 16, the 128-byte swizzle wgmma expects.
  // Rows past the tile's end are not copied: whatever the buffer holds there only reaches the
  // D columns of those tokens, which are never stored. Weight chunk: row tid / 2, half tid % 2
  // (zero-filled past n).
  constexpr int kBChunks = TM * 8 / kThreads;
  const int brow = tid >> 3, bcol = tid & 7;
  const uint8_t* bsrc[kBChunks];
  bool bok[kBChunks];
#pragma unroll
  for (int i = 0; i < kBChunks; ++i) {
    const int r = brow + 32 * i;
    bok[i] = r < rows;
    bsrc[i] = reinterpret_cast<const uint8_t*>(p.a + (row0 + (bok[i] ? r : 0)) * p.k) + bcol * 16;
  }
  const uint32_t bdst = static_cast<uint32_t>(brow * 128 + ((bcol ^ (brow & 7)) << 4));
  const int wr = tid >> 1;
  bool wok;
  const uint8_t* wsrc = we + weight_row(wr, wok) * half_k + (tid & 1) * 16;
  const uint32_t wdst = static_cast<uint32_t>(wr * kWPitch + (tid & 1) * 16);
  // C: the activation chunks issued per stage (a compile-time count; chunks past the tile's rows
  // are predicated off). kAct issues only those its mainloop instance can need (its token widths,
  // below): 7 fewer predicated-off copies per stage at N = 32. Measured (H200, same call,
  // bench/results/2026-11-26-h200-w4-gemm1-act r4): the fused instance's GEMM1 0.97 / 0.99x at
  // DeepSeek-V3 TP1 mxfp4 1024 / 4096 tokens; the same trim slowed the plain instances 1-4%
  // (fewer instructions, a worse schedule: this mainloop is latency-bound at 8 warps per SM and
  // its speed follows ptxas's schedule), so they keep every chunk.
  auto issue = [&](auto chunks_c, int s, uint32_t buf) {  // buf = s % S
    constexpr int C = decltype(chunks_c)::value;
    static_assert(C >= 1 && C <= kBChunks, "activation chunks per thread");
    if (s < nk) {
#pragma unroll
      for (int i = 0; i < C; ++i)
        if (bok[i]) cp_async16(sb_addr + buf * kBBytes + bdst + 32 * 128 * i, bsrc[i] + static_cast<int64_t>(s) * (kBK * 2), true);
      cp_async16(sw_addr + buf * kWBytes + wdst, wsrc + static_cast<int64_t>(s) * (kBK / 2), wok);
    }
    cp_async_commit();  // always a group, maybe empty: the wait counts stay uniform
  };

  // This thread's weight rows (A fragment rows g and g + 8 of its warp's 16) and their block
  // scales: the stage's bytes are contiguous (2 e8m0 or 4 e4m3) at a fixed stride per stage
  // (linear: 2 or 4 bytes; swizzled: one 512-byte k group per 4 scale columns). Rows past n read
  // row 0's (never stored); stages past the end re-read the last one (never used).
  const int lrow = wg * 64 + warp * 16 + g;
  bool lo_ok, hi_ok;
  const int64_t r_lo = weight_row(lrow, lo_ok), r_hi = weight_row(lrow + 8, hi_ok);
  constexpr int kBs = F == kMx ? 32 : 16, kPer = kBK / kBs;
  const int64_t scols = p.k / kBs;
  auto scale_base = [&](int64_t row) {  // row: a weight row (0 for rows past n)
    const uint8_t* base = static_cast<const uint8_t*>(p.scale);
    return p.swizzled ? base + e * (((p.n + 127) / 128 * 128) * ((scols + 3) / 4 * 4)) + swizzled_offset(row, 0, scols)
                      : base + (e * p.n + row) * scols;
  };
  const uint8_t* sbase_lo = scale_base(r_lo);
  const uint8_t* sbase_hi = scale_base(r_hi);
  auto scale_off = [&](int s) -> int64_t {
    if (s >= nk) s = nk - 1;
    if (!p.swizzled) return static_cast<int64_t>(s) * kPer;
    return F == kMx ? static_cast<int64_t>(s >> 1) * 512 + 2 * (s & 1) : static_cast<int64_t>(s) * 512;
  };
  auto scales = [&](int s, uint32_t& lo, uint32_t& hi) {
    const int64_t o = scale_off(s);
    if constexpr (F == kMx) {
      lo = __ldg(reinterpret_cast<const uint16_t*>(sbase_lo + o));
      hi = __ldg(reinterpret_cast<const uint16_t*>(sbase_hi + o));
    } else {
      lo = __ldg(reinterpret_cast<const uint32_t*>(sbase_lo + o));
      hi = __ldg(reinterpret_cast<const uint32_t*>(sbase_hi + o));
    }
  };

  // Tokens 0..127 of the tile in acc0 (wgmma N = N0), 128..255 in acc1 (N = N1, 0: none); the
  // CTA runs the instance of its widths (below).
  // The raw scale byte of the lane's block in a stage's scale word: MXFP4 block t / 2 (2 per
  // stage), NVFP4 block t (4 per stage).
  const uint32_t sc_shift = 8u * static_cast<uint32_t>(F == kMx ? t >> 1 : t);
  auto mainloop = [&](auto n0c, auto n1c, auto n2c) {
    constexpr int N0 = decltype(n0c)::value, N1 = decltype(n1c)::value, N2 = decltype(n2c)::value;
    static_assert(N2 == 0 || (kPair == kPairWide && N0 == 128 && N1 == 128 && N2 == 32), "a third part: kPairWide");
    float acc0[64], acc1[64];
    float acc2[16];  // kPairWide's tokens 256..287 (N2 = 32); fenced and used only then
#pragma unroll
    for (int i = 0; i < 64; ++i) acc0[i] = acc1[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) acc2[i] = 0.0f;

    // Chunk i holds rows tid / 8 + 32 i: the first half's N0 rows, then from chunk 4 the second's N1,
    // chunk 8 the third part's.
    constexpr int kChunks = !kAct ? kBChunks : (N2 > 0 ? 9 : N1 > 0 ? 4 + (N1 + 31) / 32 : N0 / 32);
    const IntC<kChunks> chunks{};
#pragma unroll
    for (int s = 0; s < S - 2; ++s) issue(chunks, s, static_cast<uint32_t>(s));
    // Raw scales of stage s in the register pair s % 3 (sc[s % 3]), loaded three stages
    // ahead into the pair they are read from. The stage loop is unrolled by three so that no
    // register moves rotate them: with a rotation (sc0 <- sc1 <- sc2 <- load) ptxas packed the
    // 16-bit MXFP4 scales of two stages into one register with a PRMT in the next stage, which
    // waited for the load there - one stage of latency cover, not three (gpt-oss-120b MXFP4,
    // ncu: long-scoreboard stalls 0.56 -> 1.09 per issue when the stage got shorter).
    uint32_t sc[3][2];
    scales(0, sc[0][0], sc[0][1]);
    scales(1, sc[1][0], sc[1][1]);
    scales(2, sc[2][0], sc[2][1]);

    uint32_t A[4][4];  // the A fragments of the stage's four k16 steps
    uint32_t buf = 0, ibuf = S - 2;  // s % S and (s + S - 2) % S
    for (int s3 = 0; s3 < nk; s3 += 3) {
#pragma unroll
      for (int u = 0; u < 3; ++u) {  // stage s = s3 + u, its scales in sc[u] (a constant index)
        const int s = s3 + u;
        if (s >= nk) break;
        // One wgmma group per k16 step: at most 3 in flight here means stage s - 1's first one is
        // done, so every wgmma of stage s - 2 is (its buffer is refilled below) ...
        wgmma_wait<3>();
        cp_async_wait<S - 3>();  // this thread's copies of stage s have landed
        fence_proxy_async();
        __syncthreads();         // ... everyone's copies, and both warpgroups are past stage s - 2
        issue(chunks, s + S - 2, ibuf);  // into the buffer of stage s - 2
        // Rows lrow / lrow + 8: this lane's words 2t, 2t + 1 of each (the stage's codes 16 t .. 16 t + 15).
        const uint8_t* wrow = sw + buf * kWBytes + lrow * kWPitch + 8 * t;
        const uint2 wl = *reinterpret_cast<const uint2*>(wrow), wh = *reinterpret_cast<const uint2*>(wrow + 8 * kWPitch);
        const uint32_t wl_sh[2] = {wl.x >> 8, wl.y >> 8}, wh_sh[2] = {wh.x >> 8, wh.y >> 8};
        // Descriptors of the stage's k16 steps: the start address field (bits 0..13, address / 16)
        // advances by 2 per step and by 1024 for the second half; it never carries out of its field.
        const uint64_t desc0 = smem_desc(sb_addr + buf * kBBytes);
        // bf16x2 multipliers of the lane's block (MXFP4 32-block t / 2, NVFP4 16-block t), rows
        // lrow / lrow + 8: every code of the lane's four k16 steps lies in it.
        const uint32_t s_lo = lut[(sc[u][0] >> sc_shift) & 0xFFu], s_hi = lut[(sc[u][1] >> sc_shift) & 0xFFu];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          wgmma_wait<3>();  // the wgmma that read A[j] (stage s - 1) is done
          // Step j's fragment: codes j, j + 4 of the lane's words (the k permutation: w4_kperm.cuh).
          auto dec = [&](uint32_t w, uint32_t sh) { return e2m1_nibble_pair(j, w, sh, p.place0, p.place1); };
          A[j][0] = bf16x2_mul(dec(wl.x, wl_sh[0]), s_lo);
          A[j][1] = bf16x2_mul(dec(wh.x, wh_sh[0]), s_hi);
          A[j][2] = bf16x2_mul(dec(wl.y, wl_sh[1]), s_lo);
          A[j][3] = bf16x2_mul(dec(wh.y, wh_sh[1]), s_hi);
          fence_regs(A[j]);  // the decode stays before the fence (register-only code could sink past it)
          fence_operand(acc0);
          fence_operand(acc1);
          if constexpr (N2 > 0) fence_operand(acc2);
          wgmma_fence();
          if constexpr (N0 == 128 && (((kPair == kPairFull || kPair == kPairWide) && N1 == 128) ||
                                      ((kPair == kPairAll || kPair == kPairFine) && N1 > 0))) {
            wgmma_pair<N1>(acc0, acc1, A[j], desc0 + 2 * j);
          } else {
            wgmma_half<N0>(acc0, A[j], desc0 + 2 * j);
            if constexpr (N1 > 0) wgmma_half<N1>(acc1, A[j], desc0 + (128 * 128) / 16 + 2 * j);
          }
          if constexpr (N2 > 0) wgmma_m64n32k16(acc2, A[j], desc0 + (256 * 128) / 16 + 2 * j);
          wgmma_commit();
          fence_operand(acc0);
          fence_operand(acc1);
          if constexpr (N2 > 0) fence_operand(acc2);
        }
        scales(s + 3, sc[u][0], sc[u][1]);
        buf = buf + 1 == S ? 0 : buf + 1;
        ibuf = ibuf + 1 == S ? 0 : ibuf + 1;
      }
    }
    wgmma_wait<0>();
    fence_operand(acc0);
    fence_operand(acc1);
    if constexpr (N2 > 0) fence_operand(acc2);
    cp_async_wait<0>();

    // D fragment (m64nN): acc[4 j + q] = (row lrow + 8 (q >= 2), token 8 j + 2 t + (q & 1)).
    if constexpr (kAct) {
      constexpr float kOut = static_cast<float>(1 << kE2m1Shift);
      // kPairFine's second halves of 8 / 16 / 24 rows through the 32-row epilogue (its tokens past the tile's rows
      // are zeros, never stored): own instances of the activation epilogue were not inlined (a 12K-instruction
      // call; ptxas C7510 then serialised every wgmma of the kernel).
      constexpr int E1 = N1 > 0 && N1 < 32 ? 32 : N1;
      auto* out = static_cast<__nv_bfloat16*>(p.d ? p.d : p.act.out);
      const int64_t o = n0 + (lrow >> 4) * 8 + g;
      // GEMM2's bf16 operand (no p.d) in the k order of this kernel when GEMM2 runs on it; bf16
      // rows for a quantise pass in plain order (that pass writes the operand).
      const int64_t oc = !p.d ? korder_pos(o, p.act.korder) : o;
      if (N0 + N1 >= 128 && p.d_staged) {
        // As the fp32 tile below: the CTA's 64 columns [n0, n0 + 64) of every token staged in the
        // activation buffers (the k order permutes inside aligned 64-column groups, so oc stays
        // in them), then copied out 128 bytes per token row (store_rows). From 128 tokens (32
        // stores per thread; at 64 tokens, 16 stores, staged with bulk copies was 1.000-1.012x:
        // bench/results/2026-11-27-h100-w4-act-bulk r1).
        auto* st = reinterpret_cast<__nv_bfloat16*>(smem_raw + (sb_addr - raw_addr));
        static_assert(TM * kW4ActStagePitch * 2 <= S * kBBytes, "the staged tile fits");
        __syncthreads();  // the other warpgroup's wgmmas are done reading these buffers
        act_epilogue<N0, true>(p.act, st, acc0, kOut, e, row0, rows, o, 0, oc - n0);
        if constexpr (N1 > 0) act_epilogue<E1, true>(p.act, st, acc1, kOut, e, row0, rows, o, 128, oc - n0);
        if constexpr (N2 > 0) act_epilogue<N2, true>(p.act, st, acc2, kOut, e, row0, rows, o, 256, oc - n0);
        const int64_t cols = min(static_cast<int64_t>(kW4ActOutputsPerCta), p.act.N - n0);
        store_rows<kW4ActOutputsPerCta * 2 / 16>(out + row0 * p.act.N + n0, p.act.N, st, kW4ActStagePitch, rows,
                                                 static_cast<uint32_t>(cols * 2));
      } else {
        act_epilogue<N0>(p.act, out, acc0, kOut, e, row0, rows, o, 0, oc);
        if constexpr (N1 > 0) act_epilogue<E1>(p.act, out, acc1, kOut, e, row0, rows, o, 128, oc);
        if constexpr (N2 > 0) act_epilogue<N2>(p.act, out, acc2, kOut, e, row0, rows, o, 256, oc);
      }
    } else if (N0 + N1 >= 64 && p.d_staged) {
      // D staged as [token][row] in the activation buffers (free: every wgmma and copy is done;
      // the barrier orders both warpgroups), then each token's 128 rows, contiguous in d, copied
      // out by one warp with 16-byte stores (store_rows) instead of the ~4 instructions per value
      // of 128 scalar stores (predicate, address, scale, store) - a sixth of the CTA's instructions
      // at Qwen3-30B-A3B's k = 768. Tiles of at most 32 tokens (16 stores per thread) keep the
      // stores: staged with bulk copies they were 0.3-1.6% slower (bench/results/2026-11-27-h100-w4-bulk-epilogue).
      constexpr float kOut = static_cast<float>(1 << kE2m1Shift);
      constexpr int kDPitch = kRowsPerCta + 4;  // floats: +16 bytes, so the quad's lanes (tokens 2t) hit distinct banks
      static_assert(TM * kDPitch * 4 <= S * kBBytes, "the staged tile fits the activation buffers");
      float* st = reinterpret_cast<float*>(smem_raw + (sb_addr - raw_addr));
      __syncthreads();  // the other warpgroup's wgmmas are done reading these buffers
      // One part's N tokens from token tok0 of the tile.
      auto stage_part = [&](auto nc, const auto& acc, int tok0) {
#pragma unroll
        for (int j = 0; j < decltype(nc)::value / 8; ++j)
#pragma unroll
          for (int q = 0; q < 4; ++q)
            st[(tok0 + 8 * j + 2 * t + (q & 1)) * kDPitch + lrow + 8 * (q >> 1)] = acc[4 * j + q] * kOut;
      };
      stage_part(n0c, acc0, 0);
      stage_part(n1c, acc1, 128);
      stage_part(n2c, acc2, 256);
      const int64_t cols = min(static_cast<int64_t>(kRowsPerCta), p.n - n0);  // rows past n are not copied
      store_rows<kRowsPerCta * 4 / 16>(static_cast<float*>(p.d) + row0 * p.n + n0, p.n, st, kDPitch, rows,
                                       static_cast<uint32_t>(cols * 4));
    } else {
      constexpr float kOut = static_cast<float>(1 << kE2m1Shift);
      float* d = static_cast<float*>(p.d);
      auto store_part = [&](auto nc, const auto& acc, int tok0) {
#pragma unroll
        for (int j = 0; j < decltype(nc)::value / 8; ++j)
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const bool ok = q >= 2 ? hi_ok : lo_ok;
            const int tok = tok0 + 8 * j + 2 * t + (q & 1);
            if (ok && tok < rows) d[(row0 + tok) * p.n + (q >= 2 ? r_hi : r_lo)] = acc[4 * j + q] * kOut;
          }
      };
      store_part(n0c, acc0, 0);
      store_part(n1c, acc1, 128);
      store_part(n2c, acc2, 256);
    }
  };
  // Half widths: the fewest of 32 / 64 / 128 that hold the rows (the second half only past 128).
  const IntC<0> none{};
  if constexpr (kPair == kPairFine) {
    // Second halves rounded up to 8 rows up to 160 (six mainloops, as the other instances); the fused-activation
    // instance to 16 (four: with six, or with the 8 / 24-row halves as well, ptxas called a mainloop or an
    // epilogue instead of inlining it - C7510, every wgmma of the kernel serialised).
    if (rows <= 128) {
      mainloop(IntC<128>{}, none, none);
    } else if (rows <= 144) {
      if constexpr (kAct) {
        mainloop(IntC<128>{}, IntC<16>{}, none);
      } else {
        if (rows <= 136) mainloop(IntC<128>{}, IntC<8>{}, none);
        else mainloop(IntC<128>{}, IntC<16>{}, none);
      }
    } else if (rows <= 160) {
      if constexpr (kAct) {
        mainloop(IntC<128>{}, IntC<32>{}, none);
      } else {
        if (rows <= 152) mainloop(IntC<128>{}, IntC<24>{}, none);
        else mainloop(IntC<128>{}, IntC<32>{}, none);
      }
    } else {
      mainloop(IntC<128>{}, IntC<128>{}, none);
    }
  } else if constexpr (kPair == kPairWide) {
    // Rows 256..287 in a third part of N = 32; fewer rows on the full halves (taken where experts have
    // 249..288 rows on average, so narrower tiles are rare). With all seven widths the fused-activation
    // instance no longer inlined its mainloops (ptxas C7510: every wgmma serialised at the calls).
    if (rows > 256) mainloop(IntC<128>{}, IntC<128>{}, IntC<32>{});
    else if (rows > 128) mainloop(IntC<128>{}, IntC<128>{}, none);
    else mainloop(IntC<128>{}, IntC<0>{}, none);
  } else {
    const int n0w = half_n(min(rows, 128)), n1w = rows > 128 ? half_n(rows - 128) : 0;
    if (n1w == 128) mainloop(IntC<128>{}, IntC<128>{}, none);
    else if (n1w == 64) mainloop(IntC<128>{}, IntC<64>{}, none);
    else if (n1w == 32) mainloop(IntC<128>{}, IntC<32>{}, none);
    else if (n0w == 128) mainloop(IntC<128>{}, IntC<0>{}, none);
    else if (n0w == 64) mainloop(IntC<64>{}, IntC<0>{}, none);
    else mainloop(IntC<32>{}, IntC<0>{}, none);
  }
}

template <int F, W4Out O, int kPair>
void launch_kernel(const Params& p, int64_t max_rows, cudaStream_t stream) {
  constexpr int TM = tile_tokens(kPair), kSmem = smem_bytes(TM);
  opt_in_dynamic_smem<w4_wgmma_kernel<F, O, kPair>>(kSmem);
  const int64_t active = std::min<int64_t>(max_rows, p.groups);
  const int64_t tiles = (max_rows + TM - 1) / TM + active;  // >= the sum over experts of ceil(rows / TM)
  if (tiles > 65535) throw Error("w4 wgmma GEMM: " + std::to_string(max_rows) + " rows need more token tiles than a grid holds");
  const int64_t per_cta = O == W4Out::ACT ? kW4ActOutputsPerCta : kRowsPerCta, cols = O == W4Out::ACT ? p.act.N : p.n;
  const dim3 grid(static_cast<unsigned>((cols + per_cta - 1) / per_cta), static_cast<unsigned>(tiles));
  launch_chained(w4_wgmma_kernel<F, O, kPair>, grid, dim3(kThreads), kSmem, stream, p);
}

// FUSEDMOE_W4_PAIR=0: both paired instances off; FUSEDMOE_W4_PAIR_ALL=0: kPairAll's off (same-binary A/Bs).
bool pair_on() {
  static const bool on = !env_switch_is_zero("FUSEDMOE_W4_PAIR");
  return on;
}
bool pair_all_on() {
  static const bool on = !env_switch_is_zero("FUSEDMOE_W4_PAIR_ALL");
  return on;
}
bool pair_fine_on() {  // FUSEDMOE_W4_PAIR_FINE=0: kPairFine's calls take kPairAll
  static const bool on = !env_switch_is_zero("FUSEDMOE_W4_PAIR_FINE");
  return on;
}
bool pair_wide_on() {  // FUSEDMOE_W4_PAIR_WIDE=0: kPairWide's calls take kPairFull
  static const bool on = !env_switch_is_zero("FUSEDMOE_W4_PAIR_WIDE");
  return on;
}
int pair_mode(int64_t max_rows, int groups, int64_t k, bool act) {
  switch (w4_wgmma_pair_rule(max_rows, groups, k, act)) {
    case W4WgmmaPair::FULL: return pair_on() ? kPairFull : kPairNone;
    case W4WgmmaPair::ALL: return pair_on() && pair_all_on() ? kPairAll : kPairNone;
    case W4WgmmaPair::WIDE: return !pair_on() ? kPairNone : pair_wide_on() ? kPairWide : kPairFull;
    case W4WgmmaPair::FINE:
      return !pair_on() || !pair_all_on() ? kPairNone : pair_fine_on() ? kPairFine : kPairAll;
    default: return kPairNone;
  }
}

template <int F, W4Out O>
void launch(const Params& p, int64_t max_rows, cudaStream_t stream) {
  const int mode = pair_mode(max_rows, p.groups, p.k, O == W4Out::ACT);
  if (mode == kPairFull) return launch_kernel<F, O, kPairFull>(p, max_rows, stream);
  if (mode == kPairAll) return launch_kernel<F, O, kPairAll>(p, max_rows, stream);
  if (mode == kPairWide) return launch_kernel<F, O, kPairWide>(p, max_rows, stream);
  if (mode == kPairFine) return launch_kernel<F, O, kPairFine>(p, max_rows, stream);
  launch_kernel<F, O, kPairNone>(p, max_rows, stream);
}

template <W4Out O>
void launch_format(Format f, const Params& p, int64_t max_rows, cudaStream_t stream) {
  if (f == Format::MXFP4) launch<kMx, O>(p, max_rows, stream);
  else launch<kNv, O>(p, max_rows, stream);
}

Params make_params(const W4Weights& w, const void* a, void* d, int groups, const int32_t* offsets) {
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
  p.d_staged = w.n % 4 == 0 && reinterpret_cast<uintptr_t>(d) % 16 == 0;  // F32 (the ACT launch sets its own)
  return p;
}

}  // namespace

// More than 192 rows per expert - an expert's first tile full - FULL (Qwen3-30B-A3B at 4096 tokens, 256 +- 16 rows
// per expert: layer 0.975-0.981x, the other presets untouched; H100 same-binary A/B,
// bench/results/2026-11-28-h100-w4-pair-instance); 113..192 - (128, 32) / (128, 64) tiles and (128, 0) ones - ALL
// (DeepSeek-V3 TP1 / gpt-oss-120b at 4096 tokens 0.975-1.000x; bench/results/2026-11-28-h100-w4-pair-all); 249..288
// - experts past 256 rows common - WIDE (Qwen3-30B-A3B 4096 tokens 0.968-0.981x, GEMM2 0.91-0.94x; at 3840 tokens,
// 240 rows per expert, 1.006x: FULL there; bench/results/2026-11-28-h100-w4-pair-wide; at 8192 tokens, 256 rows per
// expert, DeepSeek-V3 TP1 mxfp4 0.928x, gpt-oss-120b mxfp4 0.968x); 113..160 at long k - FINE (DeepSeek-V3 TP1 4096
// tokens GEMM1 0.988-0.992x, GEMM2 0.966-0.980x, gpt-oss-120b 4096 GEMM2 0.981-0.990x; H200 same-binary A/B,
// bench/results/2026-11-28-h200-w4-fine-by-k).
W4WgmmaPair w4_wgmma_pair_rule(int64_t max_rows, int groups, int64_t k, bool act) {
  const int64_t active = std::min<int64_t>(max_rows, groups);
  if (active <= 0) return W4WgmmaPair::NONE;
  const int64_t expect = max_rows / active;
  // WIDE past 256 rows only: at 512 rows per expert (Qwen3-30B-A3B 8192 tokens) 288-token tiles were 1.001 / 1.012x
  // (GEMM2 0.96-0.98x, GEMM1 + activation 1.01x; bench/results/2026-11-28-h100-w4-pair-wide r2).
  if (expect > 248 && expect <= 288) return W4WgmmaPair::WIDE;
  // FINE at long k only: with it (bench/results/2026-11-28-h100-w4-pair-fine) the GEMMs of k >= 2048 gained 2-6%
  // (DeepSeek-V3 TP1 4096 tokens GEMM2, k = 2048: 0.944-0.975; gpt-oss-120b GEMM2, k = 2880: 0.972; the fused
  // GEMM1 at k = 7168: 0.972-0.998) but Qwen3-30B-A3B's at 2048 tokens lost 0-2% (GEMM2 k = 768: 1.014-1.023,
  // the fused GEMM1 at k = 2048: 1.003-1.016) - the fixed costs of a tile weigh more at short k.
  const bool fine = k >= (act ? kW4FineMinKAct : kW4FineMinK);
  if (expect > 160) return expect > 192 ? W4WgmmaPair::FULL : W4WgmmaPair::ALL;
  return expect > 112 ? (fine ? W4WgmmaPair::FINE : W4WgmmaPair::ALL) : W4WgmmaPair::NONE;
}

bool w4_wgmma_shape_ok(const W4Weights& w) {
  return (w.format == Format::MXFP4 || w.format == Format::NVFP4) && w.k % kBK == 0 && w.k > 0 && w.n > 0 &&
         reinterpret_cast<uintptr_t>(w.w) % 16 == 0 && reinterpret_cast<uintptr_t>(w.scale) % 4 == 0;
}

void w4_wgmma_grouped_gemm(const W4Weights& w, const void* a, float* d, int groups, const int32_t* offsets,
                           int64_t max_rows, cudaStream_t stream) {
  if (max_rows <= 0 || groups <= 0) return;
  if (!w4_wgmma_shape_ok(w)) throw Error("w4 wgmma GEMM: needs MXFP4 / NVFP4 weights, k % 64 == 0, aligned pointers");
  launch_format<W4Out::F32>(w.format, make_params(w, a, d, groups, offsets), max_rows, stream);
}

const char* w4_wgmma_act_refusal(const W4Weights& w, const ActivationParams& act, bool bf16_rows) {
  if (!w4_wgmma_shape_ok(w)) return "the weights are not the wgmma kernel's (MXFP4 / NVFP4, k % 64 == 0, aligned)";
  return w4_act_refusal_common(act, w.n, bf16_rows);
}

void w4_wgmma_gemm1_activation(const W4Weights& w, const void* a, const ActivationParams& act, uint16_t* act_rows,
                               int groups, const int32_t* offsets, int64_t max_rows, cudaStream_t stream) {
  if (max_rows <= 0 || groups <= 0) return;
  if (const char* why = w4_wgmma_act_refusal(w, act, act_rows != nullptr))
    throw Error(std::string("w4 wgmma GEMM1 + activation: ") + why);
  Params p = make_params(w, a, act_rows, groups, offsets);
  p.act = act;
  // The staged epilogue's 16-byte row stores of the 64-column blocks: 16-byte aligned rows (N % 8 == 0) and output.
  const void* out = act_rows ? static_cast<const void*>(act_rows) : act.out;
  p.d_staged = act.N % 8 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
  count_fused_gemm1_launch(FusedGemm1::FOUR_BIT);
  launch_format<W4Out::ACT>(w.format, p, max_rows, stream);
}

}  // namespace fusedmoe::cuda
