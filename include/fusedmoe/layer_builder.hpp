#pragma once
// Builds layers in any format from float weights: the encoder behind `fusedmoe quantize`,
// the demo's synthetic layers and the tests' random layers (one implementation for all).
#include <cstdint>
#include <vector>

#include "fusedmoe/codecs.hpp"
#include "fusedmoe/layer_file.hpp"

namespace fusedmoe {

// Unquantised weights: w13 [E, R, K], w2 [E, K, N] row-major; biases empty = none.
struct FloatLayer {
  LayerConfig config;  // format is ignored here; activation / order / swiglu options are used
  int64_t num_experts = 0, hidden = 0, inter = 0;
  std::vector<float> w13, w2, w13_bias, w2_bias;
  int64_t w13_rows() const { return fusedmoe::w13_rows(config, inter); }
};

struct QuantizeOptions {
  Format format = Format::BF16;
  ActDtype act_dtype = ActDtype::BF16;
  Mxfp4ScaleRounding mxfp4_rounding = Mxfp4ScaleRounding::NVIDIA;
  // fp8-tensor: static activation scales to store (<= 0: none, dynamic at run time).
  float fp8_w13_input_scale = 0.0f, fp8_w2_input_scale = 0.0f;
  // nvfp4 W4A4: the activation amax the per-expert global scales are set from
  // (input_scale = amax / (448 * 6)), for GEMM1's and GEMM2's inputs.
  float nvfp4_w13_act_amax = 0.0f, nvfp4_w2_act_amax = 0.0f;
  int threads = 0;
  // Called after each weight matrix is encoded (progress); may be empty.
  void (*progress)(int64_t done, int64_t total, void* user) = nullptr;
  void* progress_user = nullptr;
};

// Gaussian-ish weights with std `weight_std`, deterministic per seed (independent of threads).
FloatLayer random_float_layer(const LayerConfig& config, int64_t num_experts, int64_t hidden,
                              int64_t inter, uint64_t seed, bool with_bias, float weight_std = 0.05f);
// Encode into options.format (the returned LayerFile's config takes the format and act_dtype).
LayerFile quantize_layer(const FloatLayer& layer, const QuantizeOptions& options);
// Dequantise a layer file back to float weights (any format).
FloatLayer dequantize_layer(const LayerFile& layer);

}  // namespace fusedmoe
