// Router on the CPU: see include/fusedmoe/routing.hpp for the contract.
//
// Every step is written as a fixed sequence of IEEE fp32 operations so that src/cuda/routing.cu
// can repeat it bit for bit (identical ids AND identical weights):
//   * exp is our own (fixed_exp below): Cody-Waite reduction + degree-7 polynomial, written with
//     explicit fma (std::fma here, __fmaf_rn on the GPU), so neither libm's expf nor CUDA's
//     expf/__expf (which differ from each other by an ulp or two) is used. Error < 1 ulp-ish
//     (checked against float64 in tests/cpu/test_routing.cpp).
//   * Subnormal values are flushed to +0 explicitly after every step that can produce one (and on
//     load of logits and bias), so a GPU build with -ftz=true / --use_fast_math agrees too.
//   * The softmax denominator is summed in the order a 32-lane warp sums it: partial j adds the
//     elements j, j+32, j+64, ... in increasing order, then partials are combined as a butterfly
//     (j + j^16, then ^8, ^4, ^2, ^1).
//   * No expression has a multiply feeding an add, so FMA contraction cannot change anything.
// If you change anything here, change src/cuda/routing.cu the same way (tests/gpu checks).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "fusedmoe/error.hpp"
#include "fusedmoe/routing.hpp"

namespace fusedmoe {
namespace detail {

// Shared with src/cuda/routing.cu (declared there): throws InvalidArgument naming the field.
void validate_routing(const RoutingConfig& c, const float* logits, int64_t num_tokens,
                      const int32_t* topk_ids, const float* topk_weights) {
  auto s = [](auto v) { return std::to_string(v); };
  if (c.num_experts < 1) throw InvalidArgument("num_experts", ">= 1", s(c.num_experts));
  if (c.topk < 1 || c.topk > c.num_experts)
    throw InvalidArgument("topk", "in [1, num_experts=" + s(c.num_experts) + "]", s(c.topk));
  if (c.score != ScoreFunction::SOFTMAX && c.score != ScoreFunction::SIGMOID)
    throw InvalidArgument("score", "SOFTMAX or SIGMOID", s(static_cast<int>(c.score)));
  if (c.num_groups < 0) throw InvalidArgument("num_groups", ">= 0 (0 = plain top-k)", s(c.num_groups));
  if (c.num_groups == 0) {
    if (c.topk_groups != 0)
      throw InvalidArgument("topk_groups", "0 when num_groups is 0 (plain top-k)", s(c.topk_groups));
  } else {
    if (c.num_experts % c.num_groups != 0)
      throw InvalidArgument("num_groups", "a divisor of num_experts=" + s(c.num_experts), s(c.num_groups));
    if (c.topk_groups < 1 || c.topk_groups > c.num_groups)
      throw InvalidArgument("topk_groups", "in [1, num_groups=" + s(c.num_groups) + "]", s(c.topk_groups));
    const int64_t kept = c.topk_groups * (c.num_experts / c.num_groups);
    if (c.topk > kept)
      throw InvalidArgument("topk", "<= experts in the kept groups (topk_groups * num_experts / num_groups = " +
                                        s(kept) + ")",
                            s(c.topk));
  }
  if (!std::isfinite(c.routed_scaling_factor) || !(c.routed_scaling_factor > 0.0f))
    throw InvalidArgument("routed_scaling_factor", "finite and > 0", s(c.routed_scaling_factor));
  if (num_tokens < 0) throw InvalidArgument("num_tokens", ">= 0", s(num_tokens));
  if (num_tokens > 0) {
    if (logits == nullptr) throw InvalidArgument("logits", "non-null", "nullptr");
    if (topk_ids == nullptr) throw InvalidArgument("topk_ids", "non-null", "nullptr");
    if (topk_weights == nullptr) throw InvalidArgument("topk_weights", "non-null", "nullptr");
  }
}

}  // namespace detail

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kFltMin = 0x1p-126f;  // smallest normal

// Subnormals (and -0) become +0.
inline float flush(float x) { return (x > -kFltMin && x < kFltMin) ? 0.0f : x; }
// Selection keys: NaN counts as -inf.
inline float nan_to_neginf(float x) { return x == x ? x : -kInf; }

inline float pow2i(int k) {  // 2^k for k in [-126, 127]
  const uint32_t bits = static_cast<uint32_t>(k + 127) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// exp(x) in fp32; results below the smallest normal are 0. Same operations as the GPU copy.
float fixed_exp(float x) {
  x = flush(x);
  if (x != x) return x;
  if (x > 89.0f) return kInf;
  if (x < -88.0f) return 0.0f;
  const float n = std::nearbyint(x * 0x1.715476p+0f);  // x * log2(e), |n| <= 128
  float r = std::fma(-n, 0x1.62e430p-1f, x);            // x - n * ln2_hi
  r = std::fma(-n, -0x1.05c610p-29f, r);                // - n * ln2_lo
  float p = 0x1.a01a02p-13f;                            // 1/7!
  p = std::fma(p, r, 0x1.6c16c2p-10f);                  // 1/6!
  p = std::fma(p, r, 0x1.111112p-7f);                   // 1/5!
  p = std::fma(p, r, 0x1.555556p-5f);                   // 1/4!
  p = std::fma(p, r, 0x1.555556p-3f);                   // 1/3!
  p = std::fma(p, r, 0.5f);
  p = std::fma(p, r, 1.0f);
  p = std::fma(p, r, 1.0f);
  const int ni = static_cast<int>(n);
  const int n1 = ni / 2;
  const int n2 = ni - n1;
  const float y = (p * pow2i(n1)) * pow2i(n2);
  return flush(y);
}

inline float fixed_sigmoid(float x) { return flush(1.0f / (1.0f + fixed_exp(-x))); }

// a ranks before b: larger key, then lower index.
inline bool ranks_before(float ka, int64_t ia, float kb, int64_t ib) {
  return ka > kb || (ka == kb && ia < ib);
}

}  // namespace

void route_cpu(const RoutingConfig& config, const float* logits, int64_t num_tokens,
               int32_t* topk_ids, float* topk_weights) {
  detail::validate_routing(config, logits, num_tokens, topk_ids, topk_weights);
  if (num_tokens == 0) return;

  const int64_t E = config.num_experts;
  const int64_t K = config.topk;
  const int64_t G = config.num_groups;
  const int64_t GK = config.topk_groups;
  const int64_t gsize = G > 0 ? E / G : E;
  const float factor = config.routed_scaling_factor;
  const float* bias = config.correction_bias;

  std::vector<float> x(E), score(E), key(E), gscore(G > 0 ? G : 0);
  std::vector<int64_t> order(E), gorder(G > 0 ? G : 0);
  std::vector<char> kept(G > 0 ? G : 0);

  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* lt = logits + t * E;
    for (int64_t e = 0; e < E; ++e) x[e] = flush(nan_to_neginf(lt[e]));

    // ---- scores ----
    if (config.score == ScoreFunction::SOFTMAX) {
      float m = -kInf;
      for (int64_t e = 0; e < E; ++e) m = x[e] > m ? x[e] : m;
      float partial[32];
      for (int j = 0; j < 32; ++j) partial[j] = 0.0f;
      for (int64_t e = 0; e < E; ++e) {
        // Logits equal to the maximum contribute exp(0) = 1 (also when the maximum is +-inf).
        const float d = x[e] == m ? 0.0f : x[e] - m;
        score[e] = fixed_exp(d);
        partial[e % 32] = partial[e % 32] + score[e];
      }
      for (int off = 16; off >= 1; off /= 2)
        for (int j = 0; j < off; ++j) partial[j] = partial[j] + partial[j + off];
      const float sum = partial[0];  // >= 1
      for (int64_t e = 0; e < E; ++e) score[e] = flush(score[e] / sum);
    } else {
      for (int64_t e = 0; e < E; ++e) score[e] = fixed_sigmoid(x[e]);
    }

    // ---- selection keys ----
    for (int64_t e = 0; e < E; ++e)
      key[e] = bias ? nan_to_neginf(flush(score[e] + flush(bias[e]))) : score[e];

    // ---- groups ----
    int64_t ncand = E;
    if (G > 0) {
      for (int64_t g = 0; g < G; ++g) {
        float a = -kInf, b = -kInf;  // largest and second largest key of the group
        for (int64_t i = g * gsize; i < (g + 1) * gsize; ++i) {
          const float v = key[i];
          if (v > a) {
            b = a;
            a = v;
          } else if (v > b) {
            b = v;
          }
        }
        gscore[g] = gsize >= 2 ? nan_to_neginf(flush(a + b)) : key[g * gsize];
        gorder[g] = g;
      }
      std::partial_sort(gorder.begin(), gorder.begin() + GK, gorder.end(), [&](int64_t a, int64_t b) {
        return ranks_before(gscore[a], a, gscore[b], b);
      });
      std::fill(kept.begin(), kept.end(), 0);
      for (int64_t i = 0; i < GK; ++i) kept[gorder[i]] = 1;
      ncand = 0;
      for (int64_t e = 0; e < E; ++e)
        if (kept[e / gsize]) order[ncand++] = e;
    } else {
      for (int64_t e = 0; e < E; ++e) order[e] = e;
    }

    // ---- experts ----
    std::partial_sort(order.begin(), order.begin() + K, order.begin() + ncand, [&](int64_t a, int64_t b) {
      return ranks_before(key[a], a, key[b], b);
    });

    // ---- weights ----
    int32_t* ids = topk_ids + t * K;
    float* w = topk_weights + t * K;
    float sum = 0.0f;
    for (int64_t k = 0; k < K; ++k) {
      ids[k] = static_cast<int32_t>(order[k]);
      w[k] = score[order[k]];
      sum = sum + w[k];
    }
    for (int64_t k = 0; k < K; ++k) {
      float v = w[k];
      if (config.renormalize && sum > 0.0f) v = flush(v / sum);  // all-zero scores stay 0
      w[k] = flush(v * factor);
    }
  }
}

}  // namespace fusedmoe
