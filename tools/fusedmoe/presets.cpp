// Shapes from the models' published configs (num_local_experts / num_experts, num_experts_per_tok,
// hidden_size, moe_intermediate_size or intermediate_size). Only the routed experts: shared
// experts (DeepSeek-V3) are a dense MLP outside this layer.
#include "presets.hpp"

namespace fusedmoe::cli {

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> p = {
      {"mixtral-8x7b", 8, 2, 4096, 14336, Activation::SILU, false, false, "Mixtral 8x7B"},
      {"qwen3-30b-a3b", 128, 8, 2048, 768, Activation::SILU, false, false, "Qwen3-30B-A3B"},
      {"deepseek-v3", 256, 8, 7168, 2048, Activation::SILU, false, false, "DeepSeek-V3 (routed experts)"},
      {"gpt-oss-120b", 128, 4, 2880, 2880, Activation::SWIGLUOAI, true, true, "gpt-oss-120b"},
      // Small shapes that every format accepts (multiples of 128), for tests and quick checks.
      {"tiny", 8, 2, 256, 128, Activation::SILU, false, false, "tiny test shape"},
      {"tiny-oai", 8, 2, 256, 256, Activation::SWIGLUOAI, true, true, "tiny gpt-oss-like test shape"},
  };
  return p;
}

const ModelPreset* find_preset(const std::string& name) {
  for (const ModelPreset& m : model_presets())
    if (name == m.name) return &m;
  return nullptr;
}

std::string preset_names() {
  std::string s;
  for (const ModelPreset& m : model_presets()) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s;
}

}  // namespace fusedmoe::cli
