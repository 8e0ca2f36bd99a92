#pragma once
// Device kernels of the benchmark (kernels.cu): data generation directly in the target format,
// the HBM read-bandwidth kernel, and an output check for non-finite values.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "fusedmoe/tensor.hpp"

namespace fmbench {

// Fills n elements of dtype F32 / F16 / BF16 / F8_E4M3 with values uniform in [lo, hi) from a
// counter-based hash of (seed, index): reproducible, independent of the launch shape.
// F8_E4M3 values are converted with round-to-nearest-even and saturation (never NaN). lo == hi
// fills the constant lo.
void gen_uniform(void* out, fusedmoe::DType dtype, size_t n, uint64_t seed, float lo, float hi,
                 cudaStream_t stream);

// n uniformly random bytes (packed int4 / e2m1 data: every byte is two valid codes).
void gen_bytes(uint8_t* out, size_t n, uint64_t seed, cudaStream_t stream);

// E8M0 scale codes: base_code + a uniform integer in [-spread, spread], clamped to [1, 254].
void gen_e8m0(uint8_t* out, size_t n, uint64_t seed, int base_code, int spread, cudaStream_t stream);

// Sets every row of a [rows, cols] tensor (F32 / F16 / BF16) to hold value `v` at column 0
// (so every sub-batch of rows has the same amax when |v| bounds the data).
void set_column0(void* data, fusedmoe::DType dtype, int64_t rows, int64_t cols, float v, cudaStream_t stream);

// Reads `bytes` (a multiple of 16) once with 16-byte loads; the result goes to *sink only in a
// case that never happens, so the loads cannot be removed. unroll in {1, 2, 4, 8}.
void hbm_read(const void* data, size_t bytes, int blocks, int threads, int unroll,
              unsigned long long* sink, cudaStream_t stream);

// The L2 flush of FlushMode::kRead (timing.hpp): reads `bytes` (a multiple of 16) with 16-byte
// loads that allocate in L2 (ld.global.cg, normal eviction priority - the streaming loads of
// hbm_read may leave older lines in place), so every line the L2 holds afterwards is a clean line
// of this buffer. Same never-taken sink as hbm_read.
void l2_flush_read(const void* data, size_t bytes, unsigned long long* sink, cudaStream_t stream);

// Adds the number of non-finite elements of a F32 / F16 / BF16 tensor to *counter (device).
void count_nonfinite(const void* data, fusedmoe::DType dtype, size_t n, unsigned long long* counter,
                     cudaStream_t stream);

}  // namespace fmbench
