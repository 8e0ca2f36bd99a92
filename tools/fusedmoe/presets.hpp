#pragma once
// `fusedmoe demo` models: real MoE shapes (from tools/common/model_shapes.hpp) plus tiny ones.
#include <cstdint>
#include <string>
#include <vector>

#include "fusedmoe/config.hpp"

namespace fusedmoe::cli {

struct ModelPreset {
  const char* name;
  int64_t num_experts;  // E
  int64_t topk;
  int64_t hidden;  // K
  int64_t inter;   // N (per expert)
  Activation activation;
  bool interleaved;  // gate/up rows alternate (gpt-oss as vLLM loads it)
  bool bias;
  const char* note;
};

const std::vector<ModelPreset>& model_presets();
// nullptr when unknown.
const ModelPreset* find_preset(const std::string& name);
std::string preset_names();  // "mixtral-8x7b, qwen3-30b-a3b, ..."

}  // namespace fusedmoe::cli
