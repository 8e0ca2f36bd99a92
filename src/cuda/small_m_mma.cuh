#pragma once
// Tensor-core pieces of the small-M kernels: one mma.sync per 16 weight rows x 8 activation rows x
// one k-block, with operands loaded straight from global memory in 16-byte pieces.
//
// The FMA kernels (small_m_dot.cuh) spend ~900 instructions per warp on 4 KB of weights (convert
// every value to fp32, one fmaf per product): ncu at M = 1 (Qwen3 fp8, H100) showed them
// latency-bound at 12 cycles per issued instruction with 16 warps per SM, DRAM at 39% of peak
// (bench/results/2026-11-21-h100-small-m-ring-rejected). With mma.sync no value is converted to
// fp32 and one instruction takes 16 x 8 x 16 (32 for e4m3) products.
//
// Fragments (PTX ISA, mma.m16n8k16 for 16-bit, m16n8k32 for e4m3): lane (g = lane / 4,
// t = lane % 4) holds A words for rows g and g + 8 and B words for column g, at logical k
// positions set by t. A permutation of k inside a k-block changes nothing as long as A and B use
// the same one, so lane t takes the 16 contiguous bytes at byte 16 t of the k-block (KB = 64
// bytes: 32 bf16 / fp16 or 64 e4m3 values) of weight rows g and g + 8 and of activation row g:
// words 0, 1 feed the first MMA (a0 / a2 of row g, a1 / a3 of row g + 8, b0 / b1), words 2, 3
// the second. Products are exact (bf16 x bf16 and e4m3 x e4m3 fit fp32); the sum order inside an
// MMA is the hardware's, fixed, so results are deterministic but not the FMA kernels' bits.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/grouped_gemm.hpp"

namespace fusedmoe::cuda::small_m {

constexpr int kKBlockBytes = 64;  // bytes of one weight row per k-block (4 lanes x 16)

// c += A (16 x k-block) x B (k-block x 8) over two MMAs: w_lo / w_hi the 16 bytes of rows g / g + 8,
// x the 16 bytes of activation row g.
template <Operand OP>
__device__ __forceinline__ void mma_kblock(float (&c)[4], const uint4& w_lo, const uint4& w_hi, const uint4& x) {
  const uint32_t a[2][4] = {{w_lo.x, w_hi.x, w_lo.y, w_hi.y}, {w_lo.z, w_hi.z, w_lo.w, w_hi.w}};
  const uint32_t b[2][2] = {{x.x, x.y}, {x.z, x.w}};
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    if constexpr (OP == Operand::FP8) {
      asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(a[s][0]), "r"(a[s][1]), "r"(a[s][2]), "r"(a[s][3]), "r"(b[s][0]), "r"(b[s][1]));
    } else if constexpr (OP == Operand::BF16) {
      asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(a[s][0]), "r"(a[s][1]), "r"(a[s][2]), "r"(a[s][3]), "r"(b[s][0]), "r"(b[s][1]));
    } else {
      asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(a[s][0]), "r"(a[s][1]), "r"(a[s][2]), "r"(a[s][3]), "r"(b[s][0]), "r"(b[s][1]));
    }
  }
}

// 16 bytes at p, or zeros (ok false: rows past the end, k past the row, activation rows past the
// expert's rows).
__device__ __forceinline__ uint4 load16_or_zero(const uint8_t* p, bool ok) {
  return ok ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0, 0, 0, 0);
}
// Weights are streamed once: no L1 allocation.
__device__ __forceinline__ uint4 load16_stream(const uint8_t* p, bool ok) {
  uint4 v = make_uint4(0, 0, 0, 0);
  if (ok)
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  return v;
}

}  // namespace fusedmoe::cuda::small_m
