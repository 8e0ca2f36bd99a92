#include <sstream>

#include "fusedmoe/error.hpp"
#include "fusedmoe/tensor.hpp"

namespace fusedmoe {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::F8_E4M3: return 1;
    case DType::F8_E5M2: return 1;
    case DType::U8: return 1;
    case DType::I32: return 4;
    case DType::I64: return 8;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::F8_E4M3: return "F8_E4M3";
    case DType::F8_E5M2: return "F8_E5M2";
    case DType::U8: return "U8";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
  }
  return "?";
}

bool dtype_from_name(const std::string& name, DType* out) {
  static const DType all[] = {DType::F32, DType::F16, DType::BF16, DType::F8_E4M3,
                              DType::F8_E5M2, DType::U8, DType::I32, DType::I64};
  for (DType d : all) {
    if (name == dtype_name(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

int64_t TensorView::numel() const {
  if (ndim <= 0) return 0;
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

bool TensorView::is_contiguous() const {
  int64_t expect = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

std::string TensorView::shape_str() const {
  std::ostringstream os;
  os << '[';
  for (int i = 0; i < ndim; ++i) os << (i ? "," : "") << shape[i];
  os << ']';
  return os.str();
}

TensorView TensorView::contiguous(void* data, DType dtype, const int64_t* shape, int ndim,
                                  DeviceType device, int device_index) {
  if (ndim < 1 || ndim > kMaxDims)
    throw InvalidArgument("ndim", "1.." + std::to_string(kMaxDims), std::to_string(ndim));
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.ndim = ndim;
  v.device = device;
  v.device_index = device_index;
  int64_t stride = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    v.shape[i] = shape[i];
    v.strides[i] = stride;
    stride *= shape[i];
  }
  return v;
}

TensorView TensorView::contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape,
                                  DeviceType device, int device_index) {
  return contiguous(data, dtype, shape.begin(), static_cast<int>(shape.size()), device,
                    device_index);
}

}  // namespace fusedmoe
