#pragma once
// A non-owning view of a strided tensor: pointer, dtype, shape, strides (in elements), device.
// Packed 4-bit tensors are viewed in their storage elements (U8, two values per byte).
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace fusedmoe {

enum class DType : uint8_t { F32, F16, BF16, F8_E4M3, F8_E5M2, U8, I32, I64 };
enum class DeviceType : uint8_t { CPU, CUDA };

size_t dtype_size(DType dtype);
// safetensors spelling: "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "U8", "I32", "I64".
const char* dtype_name(DType dtype);
bool dtype_from_name(const std::string& name, DType* out);

constexpr int kMaxDims = 4;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::F32;
  int ndim = 0;  // 0 = absent (optional tensors)
  std::array<int64_t, kMaxDims> shape{};
  std::array<int64_t, kMaxDims> strides{};  // elements, not bytes
  DeviceType device = DeviceType::CPU;
  int device_index = 0;

  bool present() const { return ndim > 0; }
  int64_t numel() const;
  bool is_contiguous() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  std::string shape_str() const;  // "[8,256,128]"
  template <typename T>
  T* ptr() const { return static_cast<T*>(data); }

  // A contiguous (row-major) view.
  static TensorView contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape,
                               DeviceType device = DeviceType::CPU, int device_index = 0);
  static TensorView contiguous(void* data, DType dtype, const int64_t* shape, int ndim,
                               DeviceType device = DeviceType::CPU, int device_index = 0);
};

}  // namespace fusedmoe
