#pragma once
// The k orders of the 4-bit kernels' 16-bit activation operands (KOrder, moe_kernels.hpp). The
// kernels that write those operands (the gathers for GEMM1; the activation kernels, their
// quantise-only passes and GEMM1's fused epilogue for GEMM2) store them so when GatherParams /
// ActivationParams::korder asks (cuda_backend.cpp: the 4-bit layers, by the kernel that reads the
// operand). A k permutation inside an MMA is free when A and B share it; these let the weights'
// e2m1 / int4 codes be decoded where they lie in the packed words.
//
// W4_WGMMA (w4_wgmma.cu; rows a multiple of 64): inside every 64 columns, column
// P = 16 t + 8 s + j + 4 b (t, j < 4; s, b < 2) is stored at c = 16 j + 8 s + 2 t + b. The wgmma A
// fragment of lane t at k16 step j holds k = 16 j + 2 t, + 1 (and + 8, + 9): so ordered, those are
// codes j and j + 4 of the lane's packed words 2 t, 2 t + 1 (codes 16 t .. 16 t + 15 of the stage),
// which a mask and one multiply place in the halves of a bf16x2 (no byte select and spread), and a
// lane's four k16 steps share one block scale. Mainloop instructions per 64-k stage 229-242 ->
// 185-199 (bench/results/2026-11-26-h100-w4-kperm).
// W4_MMA (w4_gemm.cu's mma kernel, its int4 way: W4A8 below the large-batch rows; rows a multiple
// of 8): inside every 8 columns, column P = j + 4 b (j < 4, b < 2) is stored at c = 2 j + b: a
// word of packed weights (codes k0..k7) decodes to the pairs (k0, k4) (k1, k5) (k2, k6) (k3, k7),
// and the activations' 16 bytes then are the MMA's B registers as loaded (four prmt per 8 values
// and token tile fewer; the e2m1 formats use it with the mask-multiply decode: w4_gemm.cu kLean).
#include <cstdint>

#include "cuda/moe_kernels.hpp"

namespace fusedmoe::cuda {

// Where column i of a row (or a flat index whose row length is a multiple of 64) is stored.
__host__ __device__ constexpr int64_t w4_kperm_pos(int64_t i) {
  const int64_t q = i & 63, t = q >> 4, s = (q >> 3) & 1, b = (q >> 2) & 1, j = q & 3;
  return (i & ~int64_t{63}) | (j << 4) | (s << 3) | (t << 1) | b;
}
// The same for W4_MMA (row length a multiple of 8).
__host__ __device__ constexpr int64_t w4_mma_pos(int64_t i) {
  return (i & ~int64_t{7}) | ((i & 3) << 1) | ((i >> 2) & 1);
}
__host__ __device__ constexpr int64_t korder_pos(int64_t i, KOrder o) {
  return o == KOrder::W4_WGMMA ? w4_kperm_pos(i) : o == KOrder::W4_MMA ? w4_mma_pos(i) : i;
}

#ifdef __CUDACC__
// 8 packed 16-bit values v0..v7 (value v in element v of w) -> the 4-byte pairs (v_j, v_j+4),
// j = 0..3 in .x .. .w: the unit both orders move (and the mma kernel's B registers).
__device__ __forceinline__ uint4 kpair_words(uint4 w) {
  return make_uint4(__byte_perm(w.x, w.z, 0x5410), __byte_perm(w.x, w.z, 0x7632), __byte_perm(w.y, w.w, 0x5410),
                    __byte_perm(w.y, w.w, 0x7632));
}

// 8 packed 16-bit values of columns i .. i + 7 (i % 8 == 0) stored in order o: the pairs as 4-byte
// words, 16 elements apart (W4_WGMMA: four stores) or adjacent (W4_MMA: one 16-byte store).
__device__ __forceinline__ void store_packed8_korder(void* p, int64_t i, uint4 w, KOrder o) {
  uint16_t* q = static_cast<uint16_t*>(p) + korder_pos(i, o);
  if (o == KOrder::W4_WGMMA) {
    const uint4 k = kpair_words(w);
    *reinterpret_cast<uint32_t*>(q) = k.x;
    *reinterpret_cast<uint32_t*>(q + 16) = k.y;
    *reinterpret_cast<uint32_t*>(q + 32) = k.z;
    *reinterpret_cast<uint32_t*>(q + 48) = k.w;
  } else if (o == KOrder::W4_MMA) {
    *reinterpret_cast<uint4*>(q) = kpair_words(w);
  } else {
    *reinterpret_cast<uint4*>(q) = w;
  }
}

// W4_WGMMA for a 16-block held per lane: the 4 lanes of a quad (lane % 4 == the block's index in
// its 64-column group; all 4 in `lanes`, the warp's lanes taking part) hold a group's 4 blocks (lo
// / hi: columns 0..7 / 8..15 of the lane's block, packed). Through `group` (the warp's 256 shared
// words, 16-byte aligned) each lane gets the 32 stored bytes of stored columns 16 (lane % 4) .. +
// 15 of its quad's group: st[0], st[1], to store at the group's start + 16 (lane % 4).
__device__ __forceinline__ void quad_stored32(uint4 lo, uint4 hi, uint32_t* group, unsigned lanes, uint4 (&st)[2]) {
  const int lane = threadIdx.x & 31, t = lane & 3;
  uint32_t* g = group + 32 * (lane >> 2);
  // Word 8 j + 4 s + t of the group: the pair (v_j, v_j+4) of the lane's half s.
  const uint4 kl = kpair_words(lo), kh = kpair_words(hi);
  g[t] = kl.x, g[8 + t] = kl.y, g[16 + t] = kl.z, g[24 + t] = kl.w;
  g[4 + t] = kh.x, g[12 + t] = kh.y, g[20 + t] = kh.z, g[28 + t] = kh.w;
  __syncwarp(lanes);
  const uint4* r = reinterpret_cast<const uint4*>(g + 8 * t);
  st[0] = r[0], st[1] = r[1];
  __syncwarp(lanes);  // read before the lanes' next call overwrites
}
#endif

}  // namespace fusedmoe::cuda
