#pragma once
// Dynamic shared memory above 48 KB needs cudaFuncSetAttribute, once per kernel *and device*
// (not a stream operation: fine before or during graph capture). A once-per-process opt-in left
// the second GPU of an expert-parallel run without it: cudaErrorInvalidValue at launch (seen on
// 2 H200s, 2026-11-21).
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "cuda/cuda_check.hpp"

namespace fusedmoe::cuda {

// Opts Kernel in to `bytes` of dynamic shared memory on the current device (the same `bytes`
// on every call of one Kernel).
template <auto Kernel>
void opt_in_dynamic_smem(int bytes) {
  static std::atomic<uint64_t> done{0};  // bit d: set on device d (< 64; others set every time)
  int dev = 0;
  FUSEDMOE_CUDA_CHECK(cudaGetDevice(&dev));
  const uint64_t bit = dev < 64 ? (uint64_t{1} << dev) : 0;
  if (bit != 0 && (done.load(std::memory_order_relaxed) & bit)) return;
  FUSEDMOE_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  done.fetch_or(bit, std::memory_order_relaxed);
}

}  // namespace fusedmoe::cuda
