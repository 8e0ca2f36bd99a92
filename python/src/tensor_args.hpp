#pragma once
// DLPack / buffer-protocol arrays -> fusedmoe::TensorView, without copies.
//
// A tensor argument from Python is one of:
//   None                       absent (optional tensors)
//   an array                   anything nanobind imports as an ndarray: __dlpack__ producers
//                              (PyTorch, CuPy, JAX, NumPy >= 1.22) and buffer-protocol objects
//   (array, "DTYPE")           the array's bits reinterpreted as DTYPE (e.g. a NumPy uint16 array
//                              holding bfloat16 values); when the element sizes differ the last
//                              dimension is rescaled (an int32 view of packed 4-bit data -> U8)
//   (ptr, "DTYPE", shape, strides, device_type, device_index)
//                              a raw descriptor (strides in elements; device_type 0 = CPU,
//                              1 = CUDA): the caller keeps the memory alive (used by the torch op)
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <string>
#include <vector>

#include "fusedmoe/fusedmoe.hpp"

namespace fmpy {

namespace nb = nanobind;
using fusedmoe::DeviceType;
using fusedmoe::DType;
using fusedmoe::TensorView;

using ROArray = nb::ndarray<nb::ro>;

// Keeps the imported arrays (and so their producers' memory) alive while views point into them.
struct KeepAlive {
  std::vector<ROArray> arrays;
  std::vector<nb::ndarray<>> writable;
};

// Parses a dtype name: the library's ("BF16", "F8_E4M3", ...), lower-case short names ("bf16",
// "fp8", "e4m3", ...) and framework names ("bfloat16", "float8_e4m3fn", "uint8", ...).
bool parse_dtype(const std::string& name, DType* out);

// `hint`: the dtype the argument must have, when the caller knows it (weights: from the layer file
// contract). An unsigned-integer array of the same element size is then taken as raw bits of it.
struct TensorArgOptions {
  bool writable = false;
  bool has_hint = false;
  DType hint = DType::F32;
};

TensorView tensor_arg(nb::handle obj, const char* name, KeepAlive& keep, const TensorArgOptions& opt = {});

// The same, but the argument must be present.
TensorView required_tensor_arg(nb::handle obj, const char* name, KeepAlive& keep,
                               const TensorArgOptions& opt = {});

// Sets the CUDA device of `view` for the lifetime of the guard (no-op for CPU views and in
// builds without CUDA), and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(const TensorView& view);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// Throws fusedmoe::InvalidArgument unless the view is contiguous / on the CPU.
void require_contiguous(const TensorView& v, const char* name);
void require_cpu(const TensorView& v, const char* name, const char* what);
std::string device_str(const TensorView& v);

}  // namespace fmpy
