#pragma once
// Host side of the TMA tensor maps that kernels copy their tiles with (stream_gemm.cu, w4_wgmma.cu):
// byte matrices (any element type is addressed in bytes) and GEMM1's gate / up row map. Encoded
// with cuTensorMapEncodeTiled through cudaGetDriverEntryPointByVersion (no libcuda link); passed to
// kernels as __grid_constant__ parameters. Every map zero-fills past its extents.
#include <cuda.h>

#include <cstdint>

namespace fusedmoe::cuda {

// A [rows, row_bytes] byte matrix at p (16-byte aligned, row_bytes a multiple of 16), boxes of
// box_bytes x box_rows. `who` names the caller in the error of a failed encoding.
CUtensorMap tma_byte_map(const void* p, int64_t rows, int64_t row_bytes, int box_bytes, int box_rows,
                         CUtensorMapSwizzle swizzle, const char* who);

// GEMM1's weights [groups, 2N, row_bytes] as a 5-D map: dims (row bytes, row i of an 8-row group,
// half h, group w, expert), box (box_bytes, 8, 2, box_groups, 1) = 16 x box_groups rows, box row
// 16 w + 8 h + i the weight row of output 8 w + i of half h. Halves order rows h N + o, interleaved
// rows 2 o + h (strides 2 k / k: TMA takes strides in any order). N must be a multiple of 8.
CUtensorMap tma_gate_up_map(const void* p, int64_t groups, int64_t N, int64_t row_bytes, int box_bytes,
                            int box_groups, bool interleaved, CUtensorMapSwizzle swizzle, const char* who);

}  // namespace fusedmoe::cuda
