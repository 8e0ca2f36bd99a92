#pragma once
// Shared helpers of the expert-parallel tests (CPU: tests/cpu/test_ep.cpp, GPU:
// tests/gpu/test_ep_gpu.cpp): a global random layer, each rank's part of it (its owned experts,
// ascending), per-rank tokens with the routings the tests need, and the references.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "cpu/layer_test_util.hpp"
#include "fusedmoe/ep.hpp"

namespace fusedmoe::eptest {

using test::Inputs;

// The experts of `fl` listed in `experts` (in that order), as a layer of their own.
inline FloatLayer part_of(const FloatLayer& fl, const std::vector<int32_t>& experts) {
  FloatLayer p = fl;
  const int64_t R = fl.w13_rows(), K = fl.hidden, N = fl.inter;
  p.num_experts = static_cast<int64_t>(experts.size());
  p.w13.clear();
  p.w2.clear();
  p.w13_bias.clear();
  p.w2_bias.clear();
  for (int32_t e : experts) {
    p.w13.insert(p.w13.end(), fl.w13.begin() + e * R * K, fl.w13.begin() + (e + 1) * R * K);
    p.w2.insert(p.w2.end(), fl.w2.begin() + e * K * N, fl.w2.begin() + (e + 1) * K * N);
    if (!fl.w13_bias.empty())
      p.w13_bias.insert(p.w13_bias.end(), fl.w13_bias.begin() + e * R, fl.w13_bias.begin() + (e + 1) * R);
    if (!fl.w2_bias.empty())
      p.w2_bias.insert(p.w2_bias.end(), fl.w2_bias.begin() + e * K, fl.w2_bias.begin() + (e + 1) * K);
  }
  return p;
}

enum class Routing { UNIFORM, SKEWED, EMPTY_LAST_RANK, SOME_INVALID };
inline const char* routing_name(Routing r) {
  switch (r) {
    case Routing::UNIFORM:
      return "uniform";
    case Routing::SKEWED:
      return "skewed";
    case Routing::EMPTY_LAST_RANK:
      return "empty_last_rank";
    case Routing::SOME_INVALID:
      return "some_invalid";
  }
  return "?";
}

// Tokens of one rank: random hidden states in `dtype`, distinct ids per token drawn by `routing`:
// SKEWED: 80% of the tokens route only to rank 0's experts (as far as topk allows), the rest
// uniform; EMPTY_LAST_RANK: never an expert of rank world-1; SOME_INVALID: uniform, with some
// ids -1 or >= E (they select nothing; one token selects nothing at all).
inline Inputs ep_inputs(int64_t M, int64_t K, int64_t topk, int64_t E, DType dtype, uint64_t seed, Routing routing,
                        const std::vector<int32_t>& owner, int world) {
  Inputs in = test::random_inputs(M, K, topk, E, dtype, seed);
  std::mt19937_64 rng(seed * 7919 + 17);
  std::vector<int32_t> rank0, not_last, all;
  for (int32_t e = 0; e < E; ++e) {
    all.push_back(e);
    if (owner[e] == 0) rank0.push_back(e);
    if (owner[e] != world - 1 || world == 1) not_last.push_back(e);
  }
  auto pick = [&](std::vector<int32_t> pool, std::vector<int32_t> rest, int32_t* ids) {
    std::shuffle(pool.begin(), pool.end(), rng);
    std::shuffle(rest.begin(), rest.end(), rng);
    std::vector<int32_t> chosen;
    for (int32_t e : pool)
      if (static_cast<int64_t>(chosen.size()) < topk) chosen.push_back(e);
    for (int32_t e : rest)
      if (static_cast<int64_t>(chosen.size()) < topk && std::find(chosen.begin(), chosen.end(), e) == chosen.end())
        chosen.push_back(e);
    for (int64_t k = 0; k < topk; ++k) ids[k] = chosen[k];
  };
  for (int64_t t = 0; t < M; ++t) {
    int32_t* ids = in.ids.data<int32_t>() + t * topk;
    switch (routing) {
      case Routing::UNIFORM:
        break;
      case Routing::SKEWED:
        if (rng() % 10 < 8) pick(rank0, all, ids);
        break;
      case Routing::EMPTY_LAST_RANK:
        pick(not_last, {}, ids);
        break;
      case Routing::SOME_INVALID:
        if (t == 0) {
          for (int64_t k = 0; k < topk; ++k) ids[k] = -1;
        } else if (t % 3 == 1) {
          ids[0] = static_cast<int32_t>(E + t);
        } else if (t % 3 == 2 && topk > 1) {
          ids[topk - 1] = -1;
        }
        break;
    }
  }
  return in;
}

inline float load_float(const HostTensor& t, int64_t i) {
  if (t.dtype == DType::F32) return t.data<float>()[i];
  if (t.dtype == DType::BF16) return bf16_bits_to_float(t.data<uint16_t>()[i]);
  return fp16_bits_to_float(t.data<uint16_t>()[i]);
}
inline void store_float(HostTensor& t, int64_t i, float v) {
  if (t.dtype == DType::F32)
    t.data<float>()[i] = v;
  else if (t.dtype == DType::BF16)
    t.data<uint16_t>()[i] = float_to_bf16_bits(v);
  else
    t.data<uint16_t>()[i] = float_to_fp16_bits(v);
}

// The EP arithmetic without the transport: for each rank d owning an expert of the token, the
// partial row of d's local layer (expert_map global -> local) on the same token, summed in fp32
// in ascending rank order (from -0, the identity), rounded once to the output dtype. `partials`
// [d] = the output of rank d's local layer run on all of `in` with d's expert_map.
inline HostTensor combine_reference(const Inputs& in, const std::vector<HostTensor>& partials,
                                    const std::vector<int32_t>& owner, int world) {
  const int64_t M = in.hidden.shape[0], K = in.hidden.shape[1], topk = in.ids.shape[1];
  const int64_t E = static_cast<int64_t>(owner.size());
  HostTensor out(in.hidden.dtype, {M, K});
  for (int64_t t = 0; t < M; ++t) {
    std::vector<bool> goes(static_cast<size_t>(world), false);
    for (int64_t k = 0; k < topk; ++k) {
      const int32_t g = in.ids.data<int32_t>()[t * topk + k];
      if (g >= 0 && g < E) goes[owner[g]] = true;
    }
    for (int64_t c = 0; c < K; ++c) {
      float acc = -0.0f;
      int hits = 0;
      for (int d = 0; d < world; ++d)
        if (goes[d]) {
          acc += load_float(partials[d], t * K + c);
          ++hits;
        }
      store_float(out, t * K + c, hits ? acc : 0.0f);
    }
  }
  return out;
}

// The expert_map of a rank: global id -> its local id or -1.
inline HostTensor expert_map_of(const std::vector<int32_t>& owner, int rank) {
  HostTensor m(DType::I32, {static_cast<int64_t>(owner.size())});
  int32_t next = 0;
  for (size_t e = 0; e < owner.size(); ++e) m.data<int32_t>()[e] = owner[e] == rank ? next++ : -1;
  return m;
}

}  // namespace fusedmoe::eptest
