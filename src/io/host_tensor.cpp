// HostTensor: an owning, contiguous host tensor (what the file readers return).
#include "fusedmoe/error.hpp"
#include "fusedmoe/layer_file.hpp"
#include "io/io_internal.hpp"

namespace fusedmoe {

HostTensor::HostTensor(DType dt, std::vector<int64_t> shp) : dtype(dt), shape(std::move(shp)) {
  int64_t n = 0, nbytes = 0;
  if (!detail::checked_numel(shape, &n) || !detail::checked_mul(n, static_cast<int64_t>(dtype_size(dtype)), &nbytes))
    throw InvalidArgument("shape", "non-negative dimensions whose byte size fits int64", detail::shape_string(shape));
  bytes.assign(static_cast<size_t>(nbytes), 0);
}

// A default-constructed tensor (no shape, no bytes) is "absent": 0 elements and an absent view.
// A 0-d tensor read from a file (a scalar) has no shape but one element's bytes.
int64_t HostTensor::numel() const {
  if (shape.empty()) return bytes.empty() ? 0 : 1;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

TensorView HostTensor::view() const {
  if (shape.empty()) {
    if (bytes.empty()) return TensorView{};  // absent
    throw InvalidArgument("tensor", "1 to " + std::to_string(kMaxDims) + " dimensions for a view", "a 0-d scalar");
  }
  if (shape.size() > static_cast<size_t>(kMaxDims))
    throw InvalidArgument("tensor", "at most " + std::to_string(kMaxDims) + " dimensions for a view",
                          detail::shape_string(shape));
  return TensorView::contiguous(const_cast<uint8_t*>(bytes.data()), dtype, shape.data(),
                                static_cast<int>(shape.size()));
}

}  // namespace fusedmoe
