#pragma once
// Router on the CPU: logits [M, E] (fp32) -> topk ids [M, topk] (int32) and weights (fp32).
// Ties are broken by the lower expert index (and, for grouped routing, the lower group index).
//
// What is computed, per token (all in fp32, deterministic):
//   score[e]  = softmax over all E logits (exp(x - max) / sum), or sigmoid(x)
//   key[e]    = score[e] + correction_bias[e] (or score[e] without a bias); used for selection only
//   grouped:    group score = sum of the two largest keys of the group (the key itself for groups
//               of one expert); the topk_groups best groups are kept, the others never selected
//   ids       = the topk best experts by key (among the kept groups), in descending key order,
//               equal keys lower index first
//   weights   = score[id] (unbiased); renormalize: divided by the sum of the topk scores (left
//               as they are when that sum is 0); then multiplied by routed_scaling_factor
// NaN logits count as -inf (score 0; selected only when fewer than topk others remain, lower
// index first); a NaN key (NaN bias, inf - inf) counts as -inf too. When all logits of a token
// are -inf/NaN, softmax gives every expert 1/E; logits equal to a +inf maximum share the mass.
// exp is the library's own fp32 function (not libm's, not CUDA's: < 1 ulp from exact) and
// subnormal intermediate values are flushed to 0, so route_cuda gives bitwise the same result.
// Invalid configs throw InvalidArgument naming the field: num_experts >= 1, 1 <= topk <= E,
// num_groups 0 (then topk_groups 0) or a divisor of E with 1 <= topk_groups <= num_groups and
// topk <= topk_groups * E / num_groups, routed_scaling_factor finite and > 0, num_tokens >= 0,
// pointers non-null when num_tokens > 0.
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
// One warp per token; limits: topk <= 32 and num_experts <= 4096, else NotImplemented.
// Same fp32 operations in the same order as route_cpu (ids identical, weights bitwise equal by
// design; the tests allow 1e-6 relative). Asynchronous, allocates nothing, never synchronizes:
// safe inside CUDA graph capture. Launch errors throw Error with the CUDA error string.
void route_cuda(const RoutingConfig& config, const float* logits, int64_t num_tokens,
                int32_t* topk_ids, float* topk_weights, void* stream);

}  // namespace fusedmoe
