#pragma once
// Host counterparts of kernels.hpp's generators (for --self-test, which needs no GPU).
#include <cstddef>
#include <cstdint>

#include "fusedmoe/tensor.hpp"

namespace fmbench {

void gen_uniform_host(void* out, fusedmoe::DType dtype, size_t n, uint64_t seed, float lo, float hi);
void gen_bytes_host(uint8_t* out, size_t n, uint64_t seed);
void gen_e8m0_host(uint8_t* out, size_t n, uint64_t seed, int base_code, int spread);
void set_column0_host(void* data, fusedmoe::DType dtype, int64_t rows, int64_t cols, float v);

}  // namespace fmbench
