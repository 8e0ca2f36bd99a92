#include "common.hpp"

#include <sstream>

namespace fmbench {

void throw_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  std::ostringstream os;
  os << expr << " failed: " << cudaGetErrorName(e) << " (" << cudaGetErrorString(e) << ") at " << file << ":" << line;
  throw CudaError(e, os.str());
}

bool cuda_context_broken() {
  // Non-sticky errors are cleared by cudaGetLastError; a sticky one (a kernel fault) keeps
  // coming back from every synchronising call.
  cudaGetLastError();
  if (cudaDeviceSynchronize() == cudaSuccess) return false;
  cudaGetLastError();
  return cudaDeviceSynchronize() != cudaSuccess;
}

void DeviceBuffer::alloc(size_t bytes) {
  reset();
  if (bytes == 0) return;
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    std::ostringstream os;
    os << "cudaMalloc(" << bytes << " bytes = " << (bytes >> 20) << " MiB) failed: " << cudaGetErrorName(e);
    throw CudaError(e, os.str());
  }
  ptr_ = p;
  bytes_ = bytes;
}

void DeviceBuffer::reset() {
  if (ptr_) cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

}  // namespace fmbench
