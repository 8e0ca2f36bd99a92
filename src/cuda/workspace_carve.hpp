#pragma once
// Bump allocation of 256-byte-aligned pieces from a caller's workspace, for the CUTLASS
// wrappers' per-group argument arrays (sm90_grouped_gemm.cuh, sm90_blockwise_gemm.cuh,
// sm90_gated_act_epilogue.cuh, sm90_grouped_gemm_fp8_blockwise_act.cu). With a null base it only
// counts: the same calls give the workspace size.
#include <cstddef>
#include <cstdint>

namespace fusedmoe::cuda {

class WorkspaceCarve {
 public:
  explicit WorkspaceCarve(void* base) : base_(reinterpret_cast<uintptr_t>(base)) {}
  static size_t align(size_t bytes) { return (bytes + 255) & ~size_t(255); }
  // count elements of T, then the next piece starts at the next 256-byte boundary.
  template <class T>
  T* take(size_t count) {
    T* p = reinterpret_cast<T*>(base_ + used_);
    used_ += align(count * sizeof(T));
    return p;
  }
  void* next() const { return reinterpret_cast<void*>(base_ + used_); }  // where the next piece starts
  size_t used() const { return used_; }

 private:
  uintptr_t base_;
  size_t used_ = 0;
};

}  // namespace fusedmoe::cuda
