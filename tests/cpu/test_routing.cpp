// route_cpu: hand-computed cases per mode, ties, NaN/inf, a float64 reference on random inputs,
// renormalise on/off, the scaling factor and invalid configurations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "fusedmoe/error.hpp"
#include "fusedmoe/routing.hpp"

namespace {

using fusedmoe::RoutingConfig;
using fusedmoe::ScoreFunction;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> w;
};

Routed route(const RoutingConfig& c, const std::vector<float>& logits) {
  const int64_t m = static_cast<int64_t>(logits.size()) / c.num_experts;
  Routed r;
  r.ids.assign(static_cast<size_t>(m * c.topk), -1);
  r.w.assign(static_cast<size_t>(m * c.topk), kNaN);
  fusedmoe::route_cpu(c, logits.data(), m, r.ids.data(), r.w.data());
  return r;
}

RoutingConfig make(int64_t e, int64_t k, ScoreFunction f, bool renorm = true, int64_t groups = 0,
                   int64_t topk_groups = 0, const float* bias = nullptr, float factor = 1.0f) {
  RoutingConfig c;
  c.num_experts = e;
  c.topk = k;
  c.score = f;
  c.renormalize = renorm;
  c.num_groups = groups;
  c.topk_groups = topk_groups;
  c.correction_bias = bias;
  c.routed_scaling_factor = factor;
  return c;
}

void expect_rel(double expected, float actual, double rel, const std::string& what) {
  EXPECT_LE(std::fabs(static_cast<double>(actual) - expected), rel * std::fabs(expected) + 1e-30)
      << what << ": expected " << expected << ", got " << actual;
}

// ---------------------------------------------------------------- float64 reference
struct Ref {
  std::vector<int32_t> ids;
  std::vector<double> w;
  // Every decision (group boundary, order of the selected experts, the topk boundary) rests on a
  // gap wider than what fp32 rounding can move the compared values by (a generous bound on the
  // error of the scores: 1.2e-6 relative, plus 2.4e-7 of the key for the bias addition).
  bool clear = true;
};

bool before(double ka, int64_t ia, double kb, int64_t ib) { return ka > kb || (ka == kb && ia < ib); }

Ref ref_token(const RoutingConfig& c, const float* lt) {
  const int64_t E = c.num_experts;
  std::vector<double> x(E), s(E), key(E);
  for (int64_t e = 0; e < E; ++e) x[e] = std::isnan(lt[e]) ? -HUGE_VAL : static_cast<double>(lt[e]);
  if (c.score == ScoreFunction::SOFTMAX) {
    const double m = *std::max_element(x.begin(), x.end());
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += s[e] = (x[e] == m ? 1.0 : std::exp(x[e] - m));
    for (auto& v : s) v /= sum;
  } else {
    for (int64_t e = 0; e < E; ++e) s[e] = 1.0 / (1.0 + std::exp(-x[e]));
  }
  for (int64_t e = 0; e < E; ++e) key[e] = s[e] + (c.correction_bias ? c.correction_bias[e] : 0.0);

  Ref r;
  auto tol = [&](int64_t e) { return 1.2e-6 * s[e] + 2.4e-7 * std::fabs(key[e]); };
  auto separated = [&](double ka, double kb, double t) {
    if (!(ka - kb > t)) r.clear = false;
  };
  std::vector<int64_t> cand;
  if (c.num_groups > 0) {
    const int64_t gs = E / c.num_groups;
    std::vector<double> g(c.num_groups), gtol(c.num_groups);
    for (int64_t i = 0; i < c.num_groups; ++i) {
      std::vector<int64_t> v(gs);
      std::iota(v.begin(), v.end(), i * gs);
      std::sort(v.begin(), v.end(), [&](int64_t a, int64_t b) { return before(key[a], a, key[b], b); });
      g[i] = gs >= 2 ? key[v[0]] + key[v[1]] : key[v[0]];
      gtol[i] = gs >= 2 ? tol(v[0]) + tol(v[1]) + 2.4e-7 * std::fabs(g[i]) : tol(v[0]);
    }
    std::vector<int64_t> go(c.num_groups);
    std::iota(go.begin(), go.end(), 0);
    std::sort(go.begin(), go.end(), [&](int64_t a, int64_t b) { return before(g[a], a, g[b], b); });
    if (c.topk_groups < c.num_groups) {
      const int64_t a = go[c.topk_groups - 1], b = go[c.topk_groups];
      separated(g[a], g[b], gtol[a] + gtol[b]);
    }
    std::vector<char> kept(c.num_groups, 0);
    for (int64_t i = 0; i < c.topk_groups; ++i) kept[go[i]] = 1;
    for (int64_t e = 0; e < E; ++e)
      if (kept[e / gs]) cand.push_back(e);
  } else {
    cand.resize(E);
    std::iota(cand.begin(), cand.end(), 0);
  }
  std::sort(cand.begin(), cand.end(), [&](int64_t a, int64_t b) { return before(key[a], a, key[b], b); });
  for (int64_t k = 0; k + 1 < static_cast<int64_t>(cand.size()) && k < c.topk; ++k)
    separated(key[cand[k]], key[cand[k + 1]], tol(cand[k]) + tol(cand[k + 1]));
  double sum = 0;
  for (int64_t k = 0; k < c.topk; ++k) {
    r.ids.push_back(static_cast<int32_t>(cand[k]));
    r.w.push_back(s[cand[k]]);
    sum += s[cand[k]];
  }
  for (auto& v : r.w) v = (c.renormalize && sum > 0 ? v / sum : v) * c.routed_scaling_factor;
  return r;
}

// Random logits with every decision clearly away from a tie (tokens that would be
// ambiguous are drawn again), so the ids must agree exactly.
struct Case {
  std::vector<float> logits;
  std::vector<Ref> refs;
  int redrawn = 0;
};

Case make_case(const RoutingConfig& c, int64_t m, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Case out;
  out.logits.resize(static_cast<size_t>(m * c.num_experts));
  for (int64_t t = 0; t < m; ++t) {
    float* lt = out.logits.data() + t * c.num_experts;
    for (;;) {
      for (int64_t e = 0; e < c.num_experts; ++e) lt[e] = dist(rng);
      Ref r = ref_token(c, lt);
      if (r.clear) {
        out.refs.push_back(std::move(r));
        break;
      }
      ++out.redrawn;
    }
  }
  return out;
}

void check_against_reference(const RoutingConfig& c, int64_t m, float lo, float hi, uint32_t seed,
                             const std::string& name) {
  SCOPED_TRACE(name);
  Case cs = make_case(c, m, lo, hi, seed);
  // A sanity bound (with topk = E = 256 every one of 255 gaps counts, so some redraws happen).
  EXPECT_LE(cs.redrawn, m) << "too many near-tie tokens: the generator is too coarse";
  Routed r = route(c, cs.logits);
  for (int64_t t = 0; t < m; ++t) {
    const Ref& ref = cs.refs[t];
    for (int64_t k = 0; k < c.topk; ++k) {
      const size_t i = static_cast<size_t>(t * c.topk + k);
      ASSERT_EQ(r.ids[i], ref.ids[k]) << "token " << t << " slot " << k;
      // fp32 scores (x - max rounded, own exp, tree sum of up to 256 terms, a division or two).
      EXPECT_NEAR(r.w[i], ref.w[k], 2e-6 * std::fabs(ref.w[k]) + 1e-30) << "token " << t << " slot " << k;
    }
  }
}

// ---------------------------------------------------------------- softmax
TEST(RoutingSoftmax, HandComputedRenormalized) {
  Routed r = route(make(4, 2, ScoreFunction::SOFTMAX, true), {1, 2, 3, 4});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{3, 2}));
  expect_rel(1.0 / (1.0 + std::exp(-1.0)), r.w[0], 1e-6, "w0");
  expect_rel(std::exp(-1.0) / (1.0 + std::exp(-1.0)), r.w[1], 1e-6, "w1");
}

TEST(RoutingSoftmax, HandComputedNotRenormalized) {
  // Softmax over all four logits: e^4/Z and e^3/Z, Z = e + e^2 + e^3 + e^4.
  Routed r = route(make(4, 2, ScoreFunction::SOFTMAX, false), {1, 2, 3, 4});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{3, 2}));
  expect_rel(0.6439142598879722, r.w[0], 1e-6, "w0");
  expect_rel(0.23688281808991013, r.w[1], 1e-6, "w1");
}

TEST(RoutingSoftmax, EqualLogitsAreExact) {
  Routed a = route(make(4, 3, ScoreFunction::SOFTMAX, false), {0.5f, 0.5f, 0.5f, 0.5f});
  EXPECT_EQ(a.ids, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(a.w, (std::vector<float>{0.25f, 0.25f, 0.25f}));
  Routed b = route(make(4, 3, ScoreFunction::SOFTMAX, true), {0.5f, 0.5f, 0.5f, 0.5f});
  EXPECT_EQ(b.w, (std::vector<float>{0.25f / 0.75f, 0.25f / 0.75f, 0.25f / 0.75f}));
}

TEST(RoutingSoftmax, LargeLogitsAreStable) {
  // exp(x - max): shifting by 1000 changes nothing and overflows nothing.
  Routed big = route(make(4, 2, ScoreFunction::SOFTMAX, false), {1000, 999, -1000, 0});
  Routed small = route(make(4, 2, ScoreFunction::SOFTMAX, false), {1, 0, -1999, -1000});
  EXPECT_EQ(big.ids, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(big.ids, small.ids);
  EXPECT_EQ(big.w, small.w);
  expect_rel(1.0 / (1.0 + std::exp(-1.0)), big.w[0], 1e-6, "w0");
  expect_rel(std::exp(-1.0) / (1.0 + std::exp(-1.0)), big.w[1], 1e-6, "w1");
}

TEST(RoutingSoftmax, ScalingFactorMultipliesAfterRenormalizing) {
  const std::vector<float> logits = {0.3f, -1.0f, 2.0f, 0.7f, 1.1f, -0.2f};
  Routed one = route(make(6, 3, ScoreFunction::SOFTMAX, true), logits);
  Routed scaled = route(make(6, 3, ScoreFunction::SOFTMAX, true, 0, 0, nullptr, 2.5f), logits);
  EXPECT_EQ(one.ids, (std::vector<int32_t>{2, 4, 3}));
  EXPECT_EQ(one.ids, scaled.ids);
  double sum = 0;
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(scaled.w[k], one.w[k] * 2.5f);
    sum += one.w[k];
  }
  EXPECT_NEAR(sum, 1.0, 1e-6);
  Routed raw = route(make(6, 3, ScoreFunction::SOFTMAX, false, 0, 0, nullptr, 2.5f), logits);
  double z = 0;
  for (float v : logits) z += std::exp(static_cast<double>(v) - 2.0);
  expect_rel(2.5 / z, raw.w[0], 1e-6, "w0");
  expect_rel(2.5 * std::exp(1.1 - 2.0) / z, raw.w[1], 1e-6, "w1");
  expect_rel(2.5 * std::exp(0.7 - 2.0) / z, raw.w[2], 1e-6, "w2");
}

TEST(RoutingSoftmax, WideRangeAccuracy) {
  // Logits over [-120, 120]: weights from 1 down to below fp32's normal range (flushed to 0).
  // fp32 cannot do better than the rounding of d = x - max, a relative error up to |d| * 2^-24
  // in exp(d); on top of that a few ulp (exp, sum, division).
  RoutingConfig c = make(64, 64, ScoreFunction::SOFTMAX, false);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-120.0f, 120.0f);
  std::vector<float> logits(64 * 50);
  for (auto& v : logits) v = dist(rng);
  Routed r = route(c, logits);
  for (int t = 0; t < 50; ++t) {
    const float* lt = logits.data() + t * 64;
    const double m = *std::max_element(lt, lt + 64);
    double z = 0;
    for (int e = 0; e < 64; ++e) z += std::exp(lt[e] - m);
    bool zeros = false;
    for (int k = 0; k < 64; ++k) {
      const int id = r.ids[t * 64 + k];
      const double d = m - lt[id];
      const double e = std::exp(-d) / z;
      const float a = r.w[t * 64 + k];
      if (a == 0.0f) {
        EXPECT_LT(e, 1.1754943508222875e-38 * (1 + 1e-5)) << "only subnormal weights are flushed to 0";
        zeros = true;  // the rest are 0 too, in index order
      } else {
        EXPECT_FALSE(zeros) << "descending order";
        EXPECT_NEAR(a, e, (6e-7 + d * 0x1p-24) * e) << "t " << t << " k " << k;
        if (k > 0) {
          EXPECT_GT(lt[r.ids[t * 64 + k - 1]], lt[id]);
        }
      }
      if (zeros && k > 0 && r.w[t * 64 + k - 1] == 0.0f) {
        EXPECT_LT(r.ids[t * 64 + k - 1], id);
      }
    }
  }
}

// ---------------------------------------------------------------- sigmoid
TEST(RoutingSigmoid, HandComputed) {
  Routed r = route(make(4, 2, ScoreFunction::SIGMOID, false), {0, 1, -1, 2});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{3, 1}));
  expect_rel(0.8807970779778823, r.w[0], 1e-6, "w0");
  expect_rel(0.7310585786300049, r.w[1], 1e-6, "w1");
  Routed n = route(make(4, 2, ScoreFunction::SIGMOID, true), {0, 1, -1, 2});
  EXPECT_EQ(n.ids, r.ids);
  expect_rel(0.5464491031607007, n.w[0], 1e-6, "w0");
  expect_rel(0.4535508968392993, n.w[1], 1e-6, "w1");
  Routed half = route(make(2, 1, ScoreFunction::SIGMOID, false), {0, -3});
  EXPECT_EQ(half.w[0], 0.5f);  // sigmoid(0) is exact
}

TEST(RoutingSigmoid, WideRangeAccuracy) {
  // sigmoid(x) = 1 / (1 + exp(-x)) with the library's exp: within a few ulp of float64 down to
  // the smallest normal (about x = -87.3); below that the score is flushed to 0.
  RoutingConfig c = make(64, 64, ScoreFunction::SIGMOID, false);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-92.0f, 30.0f);
  std::vector<float> logits(64 * 100);
  for (auto& v : logits) v = dist(rng);
  Routed r = route(c, logits);
  for (int t = 0; t < 100; ++t)
    for (int k = 0; k < 64; ++k) {
      const float x = logits[t * 64 + r.ids[t * 64 + k]];
      const double e = 1.0 / (1.0 + std::exp(-static_cast<double>(x)));
      const float a = r.w[t * 64 + k];
      if (a == 0.0f) {
        EXPECT_LT(e, 1.1754943508222875e-38 * (1 + 1e-5)) << "x " << x;
      } else {
        EXPECT_NEAR(a, e, 4e-7 * e) << "x " << x;
      }
    }
}

TEST(RoutingSigmoid, BiasSelectsButDoesNotWeigh) {
  // All scores 0.5; the bias alone decides, the weights stay the unbiased 0.5.
  const float bias[4] = {0.0f, 0.1f, -0.1f, 0.2f};
  const std::vector<float> logits = {0, 0, 0, 0};
  Routed r = route(make(4, 2, ScoreFunction::SIGMOID, false, 0, 0, bias), logits);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{3, 1}));
  EXPECT_EQ(r.w, (std::vector<float>{0.5f, 0.5f}));
  Routed n = route(make(4, 2, ScoreFunction::SIGMOID, true, 0, 0, bias, 2.5f), logits);
  EXPECT_EQ(n.ids, r.ids);
  EXPECT_EQ(n.w, (std::vector<float>{1.25f, 1.25f}));
  // The bias can pick an expert whose own score is lower.
  const float bias2[3] = {0.0f, 0.5f, 0.0f};
  Routed s = route(make(3, 1, ScoreFunction::SIGMOID, false, 0, 0, bias2), {1.0f, 0.0f, -1.0f});
  EXPECT_EQ(s.ids[0], 1);
  EXPECT_EQ(s.w[0], 0.5f);
}

TEST(RoutingSigmoid, SoftmaxWithBias) {
  const float bias[3] = {0.0f, 0.0f, 0.9f};
  Routed r = route(make(3, 2, ScoreFunction::SOFTMAX, false, 0, 0, bias), {2.0f, 1.0f, 0.0f});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2, 0}));  // keys: 0.665+0, 0.245, 0.090+0.9
  const double z = std::exp(2.0) + std::exp(1.0) + 1.0;
  expect_rel(1.0 / z, r.w[0], 1e-6, "w0");
  expect_rel(std::exp(2.0) / z, r.w[1], 1e-6, "w1");
}

// ---------------------------------------------------------------- grouped (DeepSeek-V3)
TEST(RoutingGrouped, HandComputedDropsTheBestExpertsGroup) {
  // Groups of 2. Group sums of top-2 softmax scores (proportional to): g0 e^4.5 + e^-10 = 90.0,
  // g1 2e^4 = 109.2, g2 e^4.2 + e^3.9 = 116.1, g3 2. Keep g2, g1: expert 0 (the best) is out.
  const std::vector<float> logits = {4.5f, -10.0f, 4.0f, 4.0f, 4.2f, 3.9f, 0.0f, 0.0f};
  Routed r = route(make(8, 3, ScoreFunction::SOFTMAX, true, 4, 2), logits);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{4, 2, 3}));
  const double d = std::exp(4.2) + 2 * std::exp(4.0);
  expect_rel(std::exp(4.2) / d, r.w[0], 1e-6, "w0");
  expect_rel(std::exp(4.0) / d, r.w[1], 1e-6, "w1");
  expect_rel(std::exp(4.0) / d, r.w[2], 1e-6, "w2");
  // Plain top-k takes expert 0.
  Routed p = route(make(8, 3, ScoreFunction::SOFTMAX, true), logits);
  EXPECT_EQ(p.ids, (std::vector<int32_t>{0, 4, 2}));
}

TEST(RoutingGrouped, SigmoidBiasGroupScoreUsesTopTwoBiased) {
  // Scores all 0.5; keys = 0.5 + bias (exact binary fractions).
  // g0 {0.9, 0.1} sum 1.0 | g1 {0.7, 0.7} 1.4 | g2 {0.75, 0.625} 1.375 | g3 {0.8, 0.0} 0.8
  const float bias[8] = {0.4f, -0.4f, 0.2f, 0.2f, 0.25f, 0.125f, 0.3f, -0.5f};
  const std::vector<float> logits(8, 0.0f);
  Routed r = route(make(8, 3, ScoreFunction::SIGMOID, true, 4, 2, bias, 2.5f), logits);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{4, 2, 3}));
  for (float w : r.w) EXPECT_EQ(w, (0.5f / 1.5f) * 2.5f);
  // Keeping 3 groups lets expert 0 (key 0.9) in; keeping all 4 also g3's expert 6 (0.8).
  Routed r3 = route(make(8, 3, ScoreFunction::SIGMOID, false, 4, 3, bias), logits);
  EXPECT_EQ(r3.ids, (std::vector<int32_t>{0, 4, 2}));
  Routed r4 = route(make(8, 3, ScoreFunction::SIGMOID, false, 4, 4, bias), logits);
  EXPECT_EQ(r4.ids, (std::vector<int32_t>{0, 6, 4}));
}

TEST(RoutingGrouped, UnbiasedWeightsWithDeepSeekV3Config) {
  // E=256, 8 groups of 32, keep 4, top-8, sigmoid + bias, scaling 2.5, renormalised.
  std::vector<float> bias(256);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> bd(-0.1f, 0.1f);
  for (auto& b : bias) b = bd(rng);
  RoutingConfig c = make(256, 8, ScoreFunction::SIGMOID, true, 8, 4, bias.data(), 2.5f);
  check_against_reference(c, 300, -4.0f, 4.0f, 12, "deepseek-v3");
  Case cs = make_case(c, 50, -4.0f, 4.0f, 13);
  Routed r = route(c, cs.logits);
  for (int t = 0; t < 50; ++t) {
    double sum = 0;
    std::vector<int> groups;
    for (int k = 0; k < 8; ++k) {
      sum += r.w[t * 8 + k];
      groups.push_back(r.ids[t * 8 + k] / 32);
    }
    EXPECT_NEAR(sum, 2.5, 1e-5);
    std::sort(groups.begin(), groups.end());
    EXPECT_LE(std::unique(groups.begin(), groups.end()) - groups.begin(), 4);
  }
}

TEST(RoutingGrouped, GroupsOfOneUseTheKeyItself) {
  const std::vector<float> logits = {0.0f, 3.0f, 1.0f, 2.0f};
  Routed r = route(make(4, 2, ScoreFunction::SIGMOID, false, 4, 2), logits);
  Routed p = route(make(4, 2, ScoreFunction::SIGMOID, false), logits);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(r.ids, p.ids);
  EXPECT_EQ(r.w, p.w);
}

TEST(RoutingGrouped, OneGroupEqualsPlainTopk) {
  RoutingConfig g = make(64, 6, ScoreFunction::SOFTMAX, true, 1, 1);
  RoutingConfig p = make(64, 6, ScoreFunction::SOFTMAX, true);
  Case cs = make_case(p, 40, -3, 3, 5);
  Routed a = route(g, cs.logits), b = route(p, cs.logits);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.w, b.w);
}

// ---------------------------------------------------------------- ties and order
TEST(RoutingTies, LowerExpertIndexFirst) {
  Routed a = route(make(5, 2, ScoreFunction::SOFTMAX, false), {1, 3, 3, 2, 3});
  EXPECT_EQ(a.ids, (std::vector<int32_t>{1, 2}));
  Routed b = route(make(5, 4, ScoreFunction::SIGMOID, false), {1, 3, 3, 2, 3});
  EXPECT_EQ(b.ids, (std::vector<int32_t>{1, 2, 4, 3}));
  Routed c = route(make(6, 6, ScoreFunction::SIGMOID, false), {0, 0, 0, 0, 0, 0});
  EXPECT_EQ(c.ids, (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  // Ties made by the bias: keys 0.5+0.25 for experts 0 and 2.
  const float bias[3] = {0.25f, 0.0f, 0.25f};
  Routed d = route(make(3, 2, ScoreFunction::SIGMOID, false, 0, 0, bias), {0, 0, 0});
  EXPECT_EQ(d.ids, (std::vector<int32_t>{0, 2}));
}

TEST(RoutingTies, LowerGroupIndexFirst) {
  // All equal: groups 0 and 1 are kept, experts 0, 1, 2 chosen.
  Routed a = route(make(8, 3, ScoreFunction::SOFTMAX, false, 4, 2), std::vector<float>(8, 1.0f));
  EXPECT_EQ(a.ids, (std::vector<int32_t>{0, 1, 2}));
  // Groups 1 and 3 tie for the second place (same top-2 sum): group 1 wins.
  // g0 {5,5} | g1 {1,4} | g2 {0,0} | g3 {4,1}
  Routed b = route(make(8, 4, ScoreFunction::SIGMOID, false, 4, 2), {5, 5, 1, 4, 0, 0, 4, 1});
  EXPECT_EQ(b.ids, (std::vector<int32_t>{0, 1, 3, 2}));
}

TEST(RoutingTies, OutputSortedByDescendingKey) {
  std::vector<float> bias(128);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> bd(-0.2f, 0.2f);
  for (auto& b : bias) b = bd(rng);
  RoutingConfig c = make(128, 16, ScoreFunction::SIGMOID, false, 0, 0, bias.data());
  Case cs = make_case(c, 100, -2, 2, 4);
  Routed r = route(c, cs.logits);
  for (int t = 0; t < 100; ++t)
    for (int k = 0; k + 1 < 16; ++k) {
      const int a = r.ids[t * 16 + k], b = r.ids[t * 16 + k + 1];
      // key = score + bias; the (unbiased) weight plus the bias reproduces it up to rounding
      EXPECT_GT(r.w[t * 16 + k] + bias[a], r.w[t * 16 + k + 1] + bias[b] - 1e-6f);
    }
}

// ---------------------------------------------------------------- NaN and infinities
TEST(RoutingSpecial, NaNLogitsCountAsMinusInfinity) {
  Routed a = route(make(4, 3, ScoreFunction::SOFTMAX, false), {kNaN, 1.0f, kNaN, 0.0f});
  EXPECT_EQ(a.ids, (std::vector<int32_t>{1, 3, 0}));
  expect_rel(1.0 / (1.0 + std::exp(-1.0)), a.w[0], 1e-6, "w0");
  EXPECT_EQ(a.w[2], 0.0f);
  Routed b = route(make(4, 3, ScoreFunction::SIGMOID, true), {kNaN, 1.0f, kNaN, 0.0f});
  EXPECT_EQ(b.ids, (std::vector<int32_t>{1, 3, 0}));
  EXPECT_EQ(b.w[2], 0.0f);
  for (float w : b.w) EXPECT_FALSE(std::isnan(w));
  // -inf and NaN tie: lower index.
  Routed c = route(make(4, 4, ScoreFunction::SIGMOID, false), {kNaN, -kInf, 2.0f, kNaN});
  EXPECT_EQ(c.ids, (std::vector<int32_t>{2, 0, 1, 3}));
}

TEST(RoutingSpecial, AllMinusInfinity) {
  // Softmax: every logit equals the maximum -> uniform 1/E. Sigmoid: scores 0, renormalise
  // leaves the zero weights (no NaN).
  Routed a = route(make(4, 2, ScoreFunction::SOFTMAX, false), {-kInf, kNaN, -kInf, -kInf});
  EXPECT_EQ(a.ids, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(a.w, (std::vector<float>{0.25f, 0.25f}));
  Routed b = route(make(4, 2, ScoreFunction::SIGMOID, true, 0, 0, nullptr, 2.5f), {-kInf, -kInf, kNaN, -kInf});
  EXPECT_EQ(b.ids, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(b.w, (std::vector<float>{0.0f, 0.0f}));
}

TEST(RoutingSpecial, PlusInfinity) {
  Routed a = route(make(4, 3, ScoreFunction::SOFTMAX, false), {kInf, 0.0f, kInf, 1.0f});
  EXPECT_EQ(a.ids, (std::vector<int32_t>{0, 2, 1}));  // 1 and 3 both score 0: lower index
  EXPECT_EQ(a.w, (std::vector<float>{0.5f, 0.5f, 0.0f}));
  Routed b = route(make(3, 2, ScoreFunction::SIGMOID, false), {-100.0f, kInf, 100.0f});
  EXPECT_EQ(b.ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(b.w, (std::vector<float>{1.0f, 1.0f}));
}

TEST(RoutingSpecial, NaNBiasCountsAsMinusInfinity) {
  const float bias[3] = {kNaN, 0.0f, -kInf};
  Routed a = route(make(3, 3, ScoreFunction::SIGMOID, false, 0, 0, bias), {5.0f, 0.0f, 1.0f});
  EXPECT_EQ(a.ids, (std::vector<int32_t>{1, 0, 2}));
  expect_rel(1.0 / (1.0 + std::exp(-5.0)), a.w[1], 1e-6, "w1");
}

// ---------------------------------------------------------------- float64 reference, random
TEST(RoutingReference, PlainModesAllSizes) {
  uint32_t seed = 100;
  for (int64_t E : {8, 64, 128, 256}) {
    std::vector<float> bias(E);
    std::mt19937 rng(static_cast<uint32_t>(E));
    std::uniform_real_distribution<float> bd(-0.3f, 0.3f);
    for (auto& b : bias) b = bd(rng);
    for (ScoreFunction f : {ScoreFunction::SOFTMAX, ScoreFunction::SIGMOID})
      for (bool renorm : {false, true})
        for (bool with_bias : {false, true})
          for (int64_t k : {int64_t{1}, int64_t{2}, std::min<int64_t>(8, E), std::min<int64_t>(16, E), E}) {
            RoutingConfig c = make(E, k, f, renorm, 0, 0, with_bias ? bias.data() : nullptr,
                                   renorm ? 1.0f : 2.5f);
            check_against_reference(c, E == 256 ? 60 : 120, -5.0f, 5.0f, ++seed,
                                    "E=" + std::to_string(E) + " k=" + std::to_string(k) +
                                        (f == ScoreFunction::SOFTMAX ? " softmax" : " sigmoid") +
                                        (renorm ? " renorm" : "") + (with_bias ? " bias" : ""));
          }
  }
}

TEST(RoutingReference, GroupedAllSizes) {
  uint32_t seed = 500;
  struct G { int64_t E, groups, keep, k; };
  for (G g : {G{8, 4, 2, 2}, G{8, 2, 1, 4}, G{64, 8, 3, 6}, G{64, 16, 4, 8}, G{128, 8, 4, 8},
              G{256, 8, 4, 8}, G{256, 16, 2, 16}, G{256, 4, 4, 8}}) {
    std::vector<float> bias(g.E);
    std::mt19937 rng(static_cast<uint32_t>(g.E + g.groups));
    std::uniform_real_distribution<float> bd(-0.05f, 0.05f);
    for (auto& b : bias) b = bd(rng);
    for (ScoreFunction f : {ScoreFunction::SOFTMAX, ScoreFunction::SIGMOID})
      for (bool renorm : {false, true})
        for (bool with_bias : {false, true}) {
          RoutingConfig c = make(g.E, g.k, f, renorm, g.groups, g.keep, with_bias ? bias.data() : nullptr, 2.5f);
          check_against_reference(c, 100, -3.0f, 3.0f, ++seed,
                                  "E=" + std::to_string(g.E) + " G=" + std::to_string(g.groups) +
                                      " keep=" + std::to_string(g.keep) + " k=" + std::to_string(g.k) +
                                      (f == ScoreFunction::SOFTMAX ? " softmax" : " sigmoid") +
                                      (renorm ? " renorm" : "") + (with_bias ? " bias" : ""));
        }
  }
}

TEST(RoutingReference, DeterministicAndTokenIndependent) {
  std::vector<float> bias(256, 0.01f);
  RoutingConfig c = make(256, 8, ScoreFunction::SIGMOID, true, 8, 4, bias.data(), 2.5f);
  Case cs = make_case(c, 64, -4, 4, 77);
  Routed a = route(c, cs.logits), b = route(c, cs.logits);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(0, std::memcmp(a.w.data(), b.w.data(), a.w.size() * sizeof(float)));
  for (int t = 0; t < 64; ++t) {
    std::vector<float> one(cs.logits.begin() + t * 256, cs.logits.begin() + (t + 1) * 256);
    Routed s = route(c, one);
    for (int k = 0; k < 8; ++k) {
      EXPECT_EQ(s.ids[k], a.ids[t * 8 + k]);
      EXPECT_EQ(s.w[k], a.w[t * 8 + k]);
    }
  }
}

TEST(RoutingReference, ZeroTokensTouchNothing) {
  RoutingConfig c = make(8, 2, ScoreFunction::SOFTMAX);
  EXPECT_NO_THROW(fusedmoe::route_cpu(c, nullptr, 0, nullptr, nullptr));
}

// ---------------------------------------------------------------- invalid configurations
void expect_invalid(const RoutingConfig& c, const std::string& field, int64_t m = 1) {
  std::vector<float> logits(static_cast<size_t>(std::max<int64_t>(c.num_experts, 1) * std::max<int64_t>(m, 1)));
  std::vector<int32_t> ids(64 * 64);
  std::vector<float> w(64 * 64);
  try {
    fusedmoe::route_cpu(c, logits.data(), m, ids.data(), w.data());
    ADD_FAILURE() << "expected InvalidArgument for " << field;
  } catch (const fusedmoe::InvalidArgument& e) {
    EXPECT_EQ(e.argument(), field) << e.what();
  }
}

TEST(RoutingInvalid, Fields) {
  expect_invalid(make(0, 1, ScoreFunction::SOFTMAX), "num_experts");
  expect_invalid(make(-3, 1, ScoreFunction::SOFTMAX), "num_experts");
  expect_invalid(make(8, 0, ScoreFunction::SOFTMAX), "topk");
  expect_invalid(make(8, 9, ScoreFunction::SOFTMAX), "topk");
  expect_invalid(make(8, -1, ScoreFunction::SOFTMAX), "topk");
  RoutingConfig bad_score = make(8, 2, ScoreFunction::SOFTMAX);
  bad_score.score = static_cast<ScoreFunction>(7);
  expect_invalid(bad_score, "score");
  expect_invalid(make(8, 2, ScoreFunction::SIGMOID, true, 3, 1), "num_groups");   // 3 does not divide 8
  expect_invalid(make(8, 2, ScoreFunction::SIGMOID, true, -2, 1), "num_groups");
  expect_invalid(make(8, 2, ScoreFunction::SIGMOID, true, 16, 1), "num_groups");  // 16 does not divide 8
  expect_invalid(make(8, 2, ScoreFunction::SIGMOID, true, 4, 5), "topk_groups");  // > num_groups
  expect_invalid(make(8, 2, ScoreFunction::SIGMOID, true, 4, 0), "topk_groups");
  expect_invalid(make(8, 2, ScoreFunction::SIGMOID, true, 0, 2), "topk_groups");  // groups off
  expect_invalid(make(8, 5, ScoreFunction::SIGMOID, true, 4, 2), "topk");         // 2 groups of 2 < 5
  expect_invalid(make(256, 9, ScoreFunction::SIGMOID, true, 64, 2), "topk");
  expect_invalid(make(8, 2, ScoreFunction::SOFTMAX, true, 0, 0, nullptr, 0.0f), "routed_scaling_factor");
  expect_invalid(make(8, 2, ScoreFunction::SOFTMAX, true, 0, 0, nullptr, -1.0f), "routed_scaling_factor");
  expect_invalid(make(8, 2, ScoreFunction::SOFTMAX, true, 0, 0, nullptr, kNaN), "routed_scaling_factor");
  expect_invalid(make(8, 2, ScoreFunction::SOFTMAX, true, 0, 0, nullptr, kInf), "routed_scaling_factor");
  expect_invalid(make(8, 2, ScoreFunction::SOFTMAX), "num_tokens", -1);
}

TEST(RoutingInvalid, NullPointers) {
  RoutingConfig c = make(4, 2, ScoreFunction::SOFTMAX);
  std::vector<float> logits(4), w(2);
  std::vector<int32_t> ids(2);
  auto field = [&](const float* l, int32_t* i, float* ww) -> std::string {
    try {
      fusedmoe::route_cpu(c, l, 1, i, ww);
    } catch (const fusedmoe::InvalidArgument& e) {
      return e.argument();
    }
    return "(no throw)";
  };
  EXPECT_EQ(field(nullptr, ids.data(), w.data()), "logits");
  EXPECT_EQ(field(logits.data(), nullptr, w.data()), "topk_ids");
  EXPECT_EQ(field(logits.data(), ids.data(), nullptr), "topk_weights");
  EXPECT_EQ(field(logits.data(), ids.data(), w.data()), "(no throw)");
}

TEST(RoutingInvalid, ErrorIsAFusedmoeError) {
  RoutingConfig c = make(8, 9, ScoreFunction::SOFTMAX);
  std::vector<float> l(8), w(9);
  std::vector<int32_t> i(9);
  EXPECT_THROW(fusedmoe::route_cpu(c, l.data(), 1, i.data(), w.data()), fusedmoe::Error);
}

}  // namespace
