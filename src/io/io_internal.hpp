#pragma once
// Internals shared by the safetensors reader/writer and the layer file contract code.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fusedmoe/layer_file.hpp"

namespace fusedmoe::detail {

// a * b for sizes that come from untrusted files; false on overflow or a negative operand.
inline bool checked_mul(int64_t a, int64_t b, int64_t* out) {
  if (a < 0 || b < 0) return false;
  return !__builtin_mul_overflow(a, b, out);
}

// Product of a shape; false when a dimension is negative or the product overflows int64.
inline bool checked_numel(const std::vector<int64_t>& shape, int64_t* out) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (!checked_mul(n, d, &n)) return false;
  *out = n;
  return true;
}

std::string shape_string(const std::vector<int64_t>& shape);  // "[2,3]"

// Tensors to write, by name, without copying them (big layers are gigabytes).
using TensorRefs = std::map<std::string, const HostTensor*>;

// The whole safetensors image of these tensors (used by serialize_safetensors).
std::vector<uint8_t> serialize_safetensors_refs(const std::map<std::string, std::string>& metadata,
                                                const TensorRefs& tensors);
// Streams the file to path + ".tmp.<pid>" and renames it onto path; removes the temporary
// file on any failure, so path is either the old file or the complete new one.
void write_safetensors_refs(const std::string& path,
                            const std::map<std::string, std::string>& metadata,
                            const TensorRefs& tensors);

}  // namespace fusedmoe::detail
