#pragma once
#include <cuda_runtime.h>

#include "cuda/grouped_gemm.hpp"

namespace fusedmoe::cuda {

// Weight-streaming grouped GEMM (stream_gemm.cu) for the calls sm90_use_small_config() gives
// the swap-AB configs (few rows per expert, more than the small-M kernels take): 2-D TMA maps
// made on the host, one expert and a run of 128-row weight blocks per CTA, mma.sync from a ring
// of swizzled stages. fp32 D; SM90_TMA (bf16 / fp16 / fp8) and SM90_FP8_BLOCK (block scales
// promoted per 128-wide k block). stream_gemm_applies: operands and alignment it can take.
bool stream_gemm_applies(const GroupedGemmArgs& a, GemmPath path);
void stream_grouped_gemm(const GroupedGemmArgs& args, GemmPath path, cudaStream_t stream);
// Whether run_grouped_gemm gives the call to stream_grouped_gemm: SM90_TMA calls of the swap-AB
// range (sm90_use_small_config) up to kStreamMaxRows16 (bf16 / fp16) or kStreamMaxRowsFp8 (fp8)
// expected rows per active expert. Measured against the CUTLASS swap-AB configs in the same call
// (H200, 2026-11-26, bench/results/2026-11-26-h200-stream-gemm/v1-mma-sync): layer 0.84-0.98x
// at 1-16 rows per expert for bf16 (Qwen3-30B-A3B, DeepSeek-V3 TP1 / TP8, Mixtral M = 8..512),
// 0.84-0.94x at 1-8 rows for fp8; above that the mma.sync issue rate bounds it (fp8 at 16 rows
// 0.98-1.03x, at 32 rows 1.35x; bf16 at 32 rows 1.04x). fp8-block (SM90_FP8_BLOCK) is not given
// to it: 1.02-1.14x at 1-8 rows (its per-stage scale loads), it keeps the CUTLASS blockwise GEMM.
constexpr int64_t kStreamMaxRows16 = 16;
constexpr int64_t kStreamMaxRowsFp8 = 8;
inline bool stream_gemm_takes(const GroupedGemmArgs& a, GemmPath path) {
  if (path != GemmPath::SM90_TMA || small_m_takes(a, path) || !sm90_use_small_config(a)) return false;
  const int64_t active = a.max_rows < a.groups ? a.max_rows : a.groups;
  const int64_t limit = a.op == Operand::FP8 ? kStreamMaxRowsFp8 : kStreamMaxRows16;
  return a.max_rows <= limit * active && stream_gemm_applies(a, path);
}

}  // namespace fusedmoe::cuda
