#pragma once
// Shared helpers of fusedmoe-bench: CUDA error checks and an owning device buffer.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace fmbench {

// A failed CUDA runtime call. `sticky` errors (a kernel fault) leave the context unusable.
class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  cudaError_t code() const { return code_; }
  bool out_of_memory() const { return code_ == cudaErrorMemoryAllocation; }

 private:
  cudaError_t code_;
};

[[noreturn]] void throw_cuda(cudaError_t e, const char* expr, const char* file, int line);

#define FMB_CUDA(expr)                                                              \
  do {                                                                              \
    cudaError_t fmb_e_ = (expr);                                                    \
    if (fmb_e_ != cudaSuccess) ::fmbench::throw_cuda(fmb_e_, #expr, __FILE__, __LINE__); \
  } while (0)

// Checks the last launch error (call right after a <<<>>> launch).
#define FMB_LAUNCH_CHECK() FMB_CUDA(cudaGetLastError())

// True when the context has a sticky error (after a kernel fault nothing else can run).
bool cuda_context_broken();

// Owning cudaMalloc'd memory. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { alloc(bytes); }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = o.ptr_;
      bytes_ = o.bytes_;
      o.ptr_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }
  void alloc(size_t bytes);  // throws CudaError (out_of_memory() on cudaErrorMemoryAllocation)
  void reset();
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace fmbench
