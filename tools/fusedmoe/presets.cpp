// `fusedmoe demo` models: four real ones from the shared table (tools/common/model_shapes.hpp)
// and two small shapes that every format accepts (multiples of 128), for tests and quick checks.
#include "presets.hpp"

#include "model_shapes.hpp"

namespace fusedmoe::cli {

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> p = [] {
    std::vector<ModelPreset> v;
    for (const char* name : {"mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3", "gpt-oss-120b"}) {
      const tools::ModelShape& m = *tools::find_model_shape(name);
      v.push_back({m.name, m.num_experts, m.topk, m.hidden, m.inter, m.activation, m.interleaved, m.bias,
                   m.description});
    }
    v.push_back({"tiny", 8, 2, 256, 128, Activation::SILU, false, false, "tiny test shape"});
    v.push_back({"tiny-oai", 8, 2, 256, 256, Activation::SWIGLUOAI, true, true, "tiny gpt-oss-like test shape"});
    return v;
  }();
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
