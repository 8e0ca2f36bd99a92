#pragma once
// Error checking for CUDA runtime calls and kernel launches: every failure becomes a
// fusedmoe::Error naming the call, the file and the line (never exit/abort).
#include <cuda_runtime.h>

#include <string>

#include "fusedmoe/error.hpp"

namespace fusedmoe::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line) {
  throw Error(std::string("CUDA error ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ") in " +
              what + " at " + file + ":" + std::to_string(line));
}

}  // namespace fusedmoe::cuda

#define FUSEDMOE_CUDA_CHECK(expr)                                                   \
  do {                                                                              \
    const cudaError_t fusedmoe_err_ = (expr);                                       \
    if (fusedmoe_err_ != cudaSuccess)                                               \
      ::fusedmoe::cuda::throw_cuda_error(fusedmoe_err_, #expr, __FILE__, __LINE__); \
  } while (0)
