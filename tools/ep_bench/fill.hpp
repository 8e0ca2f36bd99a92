#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace epbench {
// n values uniform in [-amp, amp), deterministic per (seed, index).
void fill_bf16(void* p, size_t n, uint64_t seed, float amp, cudaStream_t s);
void fill_e4m3(void* p, size_t n, uint64_t seed, float amp, cudaStream_t s);
void fill_f32(void* p, size_t n, float v, cudaStream_t s);
}  // namespace epbench
