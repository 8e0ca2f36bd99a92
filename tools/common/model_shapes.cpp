// Shapes from the models' published configs: num_local_experts / num_experts / n_routed_experts,
// num_experts_per_tok, hidden_size, moe_intermediate_size (or intermediate_size for Mixtral and
// gpt-oss).
#include "model_shapes.hpp"

namespace fusedmoe::tools {

const std::vector<ModelShape>& model_shapes() {
  static const std::vector<ModelShape> m = {
      {"mixtral-8x7b", 8, 2, 4096, 14336, Activation::SILU, false, false, false, "Mixtral-8x7B"},
      {"qwen3-30b-a3b", 128, 8, 2048, 768, Activation::SILU, false, false, false, "Qwen3-30B-A3B"},
      {"qwen3-235b-a22b", 128, 8, 4096, 1536, Activation::SILU, false, false, false, "Qwen3-235B-A22B"},
      {"deepseek-v3", 256, 8, 7168, 2048, Activation::SILU, false, false, false, "DeepSeek-V3 routed experts"},
      {"gpt-oss-120b", 128, 4, 2880, 2880, Activation::SWIGLUOAI, true, true, false, "gpt-oss-120b"},
      {"llama4-scout", 16, 1, 5120, 8192, Activation::SILU, false, false, true, "Llama-4-Scout routed experts"},
  };
  return m;
}

const ModelShape* find_model_shape(const std::string& name) {
  for (const ModelShape& s : model_shapes())
    if (name == s.name) return &s;
  return nullptr;
}

}  // namespace fusedmoe::tools
