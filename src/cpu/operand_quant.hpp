#pragma once
// Quantisation of a GEMM's activation operand, exactly as LAYER_FILE.md's "How activations are
// quantised" says, returning the dequantised values the GEMM multiplies (q x scale).
#include <cstdint>

#include "fusedmoe/config.hpp"

namespace fusedmoe::cpu {

struct OperandQuant {
  const LayerConfig* config = nullptr;
  // fp8-tensor: the per-tensor scale to use (static, or the dynamic amax / 448).
  float tensor_scale = 1.0f;
  // nvfp4 W4A4: per-expert activation global dequant factors (input_scale = 1/gs), [E].
  const float* nvfp4_input_scale = nullptr;
};

// One row of `cols` values (already rounded to the activation dtype) of expert `expert`.
template <typename T>
void quantize_operand_row(const OperandQuant& q, const float* in, int64_t cols, int64_t expert, T* out);

}  // namespace fusedmoe::cpu
