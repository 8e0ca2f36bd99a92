#pragma once
// Layers built expert by expert: synthetic ones for `demo` and converted ones for `quantize`.
// Only one expert's float weights per worker thread exist at a time, so a DeepSeek-V3-sized
// layer (45 G float values) never needs its float copy in memory.
#include <cstdint>
#include <functional>

#include "common.hpp"
#include "fusedmoe/layer_builder.hpp"

namespace fusedmoe::cli {

// Fills `one` (num_experts = 1, config/hidden/inter already set) with expert e's float
// weights. Called from several threads at once, each with its own `one`.
using ExpertSource = std::function<void(int64_t e, FloatLayer& one)>;
// Sees each expert's float weights after they are filled (e.g. calibration); may be empty.
using ExpertHook = std::function<void(int64_t e, const FloatLayer& one)>;

// Encodes E experts with quantize_layer one at a time (threads workers; 0 = all cores) and
// stacks them into one layer of options.format. `float_config` gives activation, order and
// swiglu options. Progress: one tick per expert.
LayerFile build_by_expert(const LayerConfig& float_config, int64_t E, int64_t K, int64_t N,
                          const QuantizeOptions& options, const ExpertSource& source,
                          const ExpertHook& hook, int threads, Progress& progress);

// Deterministic random expert weights with bf16 values (std 1/sqrt(fan-in), so activations stay
// O(1)); the same for a given (seed, e) whatever the thread count.
void random_expert(uint64_t seed, int64_t e, bool bias, FloatLayer& one);

// Deterministic standard-normal-ish values rounded to bf16 (hidden states, router logits).
void random_normal_bf16(uint64_t seed, uint64_t stream, float std, float* out, int64_t n);

// act(W13 x + b13) of one expert for one float token: the GEMM2 input, for calibrating static
// activation scales. Follows docs/SEMANTICS.md (order, interleaving, swigluoai clamps).
void expert_activation(const FloatLayer& one, const float* x, float* a_out);

// Rough host bytes of a layer of this format and shape (weights + scales + biases).
double layer_bytes(Format f, int64_t E, int64_t K, int64_t N, bool gated, bool bias);

}  // namespace fusedmoe::cli
