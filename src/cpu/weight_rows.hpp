#pragma once
// Dequantised rows of one expert's weight matrix, for every format: value x scale
// (x scale_2 for nvfp4), exactly as the layer file contract defines the dequantised weight.
#include <cstdint>

#include "fusedmoe/config.hpp"
#include "fusedmoe/layer.hpp"

namespace fusedmoe::cpu {

// One of the two weight matrices (w13: [E, rows=2N|N, cols=K], w2: [E, rows=K, cols=N]).
struct WeightMatrix {
  Format format = Format::BF16;
  ScaleLayout scale_layout = ScaleLayout::LINEAR;
  Int4Encoding int4_encoding = Int4Encoding::SIGNED;
  const void* data = nullptr;
  const void* scale = nullptr;    // per format (see LAYER_FILE.md)
  const float* scale_2 = nullptr; // nvfp4 [E]
  int64_t rows = 0, cols = 0;

  static WeightMatrix w13(const LayerConfig& c, const LayerWeights& w, int64_t rows, int64_t cols);
  static WeightMatrix w2(const LayerConfig& c, const LayerWeights& w, int64_t rows, int64_t cols);

  // out[0..cols) = dequantised row `row` of expert `e`.
  template <typename T>
  void dequant_row(int64_t e, int64_t row, T* out) const;
};

}  // namespace fusedmoe::cpu
