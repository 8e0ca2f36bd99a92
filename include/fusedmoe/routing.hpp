#pragma once
// Router on the CPU: logits [M, E] (fp32) -> topk ids [M, topk] (int32) and weights (fp32).
// Ties are broken by the lower expert index (and, for grouped routing, the lower group index).
#include <cstdint>

namespace fusedmoe {

enum class ScoreFunction : uint8_t { SOFTMAX, SIGMOID };

struct RoutingConfig {
  int64_t num_experts = 0;  // E
  int64_t topk = 0;
  ScoreFunction score = ScoreFunction::SOFTMAX;
  bool renormalize = true;  // divide the selected weights by their sum
  // Grouped top-k (DeepSeek-V3): experts split into num_groups groups; the topk_groups groups
  // with the largest sum of their top-2 (biased) scores are kept. 0 = plain top-k.
  int64_t num_groups = 0;
  int64_t topk_groups = 0;
  // e_score_correction_bias [E]: added to the scores for selection only; weights use the
  // unbiased scores. nullptr = none.
  const float* correction_bias = nullptr;
  float routed_scaling_factor = 1.0f;  // applied to the final weights
};

void route_cpu(const RoutingConfig& config, const float* logits, int64_t num_tokens,
               int32_t* topk_ids, float* topk_weights);

// The same routing on a CUDA device (identical ids to route_cpu): device pointers, the
// caller's cudaStream_t. correction_bias, when set, must be a device pointer too.
// Throws NotImplemented when the library is built without CUDA.
void route_cuda(const RoutingConfig& config, const float* logits, int64_t num_tokens,
                int32_t* topk_ids, float* topk_weights, void* stream);

}  // namespace fusedmoe
