#pragma once
// The routed-expert layer shapes of well-known MoE models at tensor-parallel degree 1, one table
// for the tools: `fusedmoe demo` picks models from it, fusedmoe-bench derives its presets from it
// (N divided by the tensor-parallel degree).
#include <cstdint>
#include <string>
#include <vector>

#include "fusedmoe/config.hpp"

namespace fusedmoe::tools {

struct ModelShape {
  const char* name;
  int64_t num_experts;  // E (routed experts only: DeepSeek-V3's shared expert is a dense MLP)
  int64_t topk;
  int64_t hidden;  // K
  int64_t inter;   // N per expert, unsharded
  Activation activation;
  bool interleaved;             // gate/up rows alternate in the checkpoint as vLLM loads it (gpt-oss)
  bool bias;                    // fc1 / fc2 biases
  bool router_weight_on_input;  // the router weight scales the input rows (Llama 4, top-1)
  const char* description;
};

const std::vector<ModelShape>& model_shapes();
const ModelShape* find_model_shape(const std::string& name);  // nullptr when unknown

}  // namespace fusedmoe::tools
