#pragma once
// The k order of the 4-bit wgmma kernel's bf16 activation operand (w4_wgmma.cu). The kernels that
// write that operand (the gather for GEMM1; the activation kernels, their quantise-only passes and
// GEMM1's fused epilogue for GEMM2) store it so when GatherParams / ActivationParams::kperm is set
// (cuda_backend.cpp: the 4-bit layers whose GEMM runs on that kernel). Inside every 64 columns,
// column P = 16 t + 8 s + j + 4 b (t, j < 4; s, b < 2) is stored at c = 16 j + 8 s + 2 t + b.
//
// Why: the wgmma A fragment of lane t at k16 step j holds k = 16 j + 2 t, + 1 (and + 8, + 9). With
// the activations so permuted, those k are the weights' e2m1 codes j and j + 4 of the lane's
// packed words 2 t, 2 t + 1 (codes 16 t .. 16 t + 15 of the stage): a mask and one multiply place
// both in the halves of a bf16x2 (no byte select and spread), and a lane's four k16 steps share
// one block scale. The mainloop's instructions per 64-k stage: 229-242 -> 185-199 (16 bytes of
// packed weights and their decode per lane and row pair, ~90 -> ~55).
#include <cstdint>

namespace fusedmoe::cuda {

// Where column i of a row (or a flat index whose row length is a multiple of 64) is stored.
__host__ __device__ constexpr int64_t w4_kperm_pos(int64_t i) {
  const int64_t q = i & 63, t = q >> 4, s = (q >> 3) & 1, b = (q >> 2) & 1, j = q & 3;
  return (i & ~int64_t{63}) | (j << 4) | (s << 3) | (t << 1) | b;
}

#ifdef __CUDACC__
// 8 packed bf16 / fp16 values of columns i .. i + 7 (i % 8 == 0; value v in element v of w) in the
// permuted order: the pairs (v_j, v_j+4) as 4-byte words 16 elements apart.
__device__ __forceinline__ void store_packed8_kperm(void* p, int64_t i, uint4 w) {
  uint16_t* q = static_cast<uint16_t*>(p) + w4_kperm_pos(i);
  *reinterpret_cast<uint32_t*>(q) = __byte_perm(w.x, w.z, 0x5410);
  *reinterpret_cast<uint32_t*>(q + 16) = __byte_perm(w.x, w.z, 0x7632);
  *reinterpret_cast<uint32_t*>(q + 32) = __byte_perm(w.y, w.w, 0x5410);
  *reinterpret_cast<uint32_t*>(q + 48) = __byte_perm(w.y, w.w, 0x7632);
}
#endif

}  // namespace fusedmoe::cuda
