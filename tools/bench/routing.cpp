#include "routing.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>

namespace fmbench {

uint64_t Rng::next() {
  uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
double Rng::uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
uint64_t Rng::below(uint64_t n) { return n == 0 ? 0 : next() % n; }

uint64_t hash_combine(uint64_t a, uint64_t b) {
  Rng r(a ^ (b + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2)));
  return r.next();
}
uint64_t hash_string(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

const char* routing_name(RoutingDist d) {
  switch (d) {
    case RoutingDist::UNIFORM: return "uniform";
    case RoutingDist::ZIPF: return "zipf";
    case RoutingDist::ONE: return "one";
    case RoutingDist::BALANCED: return "balanced";
  }
  return "?";
}

std::vector<RoutingDist> all_routings() {
  return {RoutingDist::UNIFORM, RoutingDist::ZIPF, RoutingDist::ONE, RoutingDist::BALANCED};
}

bool routing_from_name(const std::string& s, RoutingDist* out) {
  for (RoutingDist d : all_routings())
    if (s == routing_name(d)) return *out = d, true;
  return false;
}

Routing make_routing(RoutingDist dist, int64_t M, int64_t topk, int64_t E, double zipf_s, uint64_t seed) {
  if (topk < 1 || topk > E) throw std::invalid_argument("make_routing: need 1 <= topk <= E");
  Routing r;
  r.M = M;
  r.topk = topk;
  r.ids.resize(static_cast<size_t>(M * topk));
  r.weights.resize(static_cast<size_t>(M * topk));
  Rng rng(hash_combine(seed, hash_combine(static_cast<uint64_t>(dist) + 1,
                                          hash_combine(static_cast<uint64_t>(M), hash_combine(topk, E)))));

  // Zipf: a random permutation assigns the ranks, so the hot experts are not always 0, 1, ...
  std::vector<double> zipf_w;
  if (dist == RoutingDist::ZIPF) {
    std::vector<int64_t> perm(static_cast<size_t>(E));
    std::iota(perm.begin(), perm.end(), 0);
    for (int64_t i = E - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(static_cast<uint64_t>(i + 1))]);
    zipf_w.resize(static_cast<size_t>(E));
    for (int64_t rank = 0; rank < E; ++rank) zipf_w[perm[rank]] = 1.0 / std::pow(static_cast<double>(rank + 1), zipf_s);
  }

  std::vector<int64_t> pool(static_cast<size_t>(E));
  std::vector<std::pair<double, int32_t>> keys(static_cast<size_t>(E));
  for (int64_t t = 0; t < M; ++t) {
    int32_t* ids = &r.ids[static_cast<size_t>(t * topk)];
    switch (dist) {
      case RoutingDist::UNIFORM: {
        // Partial Fisher-Yates: the first topk of a random permutation.
        std::iota(pool.begin(), pool.end(), 0);
        for (int64_t k = 0; k < topk; ++k) {
          const int64_t j = k + static_cast<int64_t>(rng.below(static_cast<uint64_t>(E - k)));
          std::swap(pool[k], pool[j]);
          ids[k] = static_cast<int32_t>(pool[k]);
        }
        break;
      }
      case RoutingDist::ZIPF: {
        // Weighted sampling without replacement (Efraimidis-Spirakis keys u^(1/w)): the topk largest.
        for (int64_t e = 0; e < E; ++e) {
          double u = rng.uniform();
          if (u <= 0.0) u = 1e-300;
          keys[e] = {std::log(u) / zipf_w[e], static_cast<int32_t>(e)};
        }
        std::partial_sort(keys.begin(), keys.begin() + topk, keys.end(),
                          [](const auto& a, const auto& b) { return a.first > b.first; });
        for (int64_t k = 0; k < topk; ++k) ids[k] = keys[k].second;
        break;
      }
      case RoutingDist::ONE:
        for (int64_t k = 0; k < topk; ++k) ids[k] = static_cast<int32_t>(k);
        break;
      case RoutingDist::BALANCED:
        for (int64_t k = 0; k < topk; ++k) ids[k] = static_cast<int32_t>((t * topk + k) % E);
        break;
    }
    // Router weights: positive; normalised to sum 1 for topk > 1 (as after a softmax + renormalise).
    float* w = &r.weights[static_cast<size_t>(t * topk)];
    if (topk == 1) {
      w[0] = static_cast<float>(0.5 + 0.5 * rng.uniform());
    } else {
      double sum = 0;
      for (int64_t k = 0; k < topk; ++k) sum += (w[k] = static_cast<float>(0.1 + 0.9 * rng.uniform()));
      for (int64_t k = 0; k < topk; ++k) w[k] = static_cast<float>(w[k] / sum);
    }
  }
  return r;
}

std::vector<int32_t> make_expert_map(int64_t E, int64_t ep) {
  if (ep <= 1) return {};
  const int64_t local = E / ep;
  std::vector<int32_t> m(static_cast<size_t>(E));
  for (int64_t g = 0; g < E; ++g) m[g] = g < local ? static_cast<int32_t>(g) : -1;
  return m;
}

SlotCounts count_slots(const Routing& r, const std::vector<int32_t>& expert_map, int64_t local_experts) {
  SlotCounts c;
  std::vector<int64_t> per(static_cast<size_t>(local_experts), 0);
  for (int32_t g : r.ids) {
    const int32_t l = local_expert(g, expert_map, local_experts);
    if (l < 0 || l >= local_experts) continue;
    ++c.valid_slots;
    ++per[l];
  }
  for (int64_t e = 0; e < local_experts; ++e) {
    if (per[e] > 0) c.experts_hit.push_back(static_cast<int32_t>(e));
    c.max_tokens_per_expert = std::max(c.max_tokens_per_expert, per[e]);
  }
  return c;
}

namespace {
bool write_npy(const std::string& path, const char* descr, const void* data, size_t elem, int64_t rows, int64_t cols) {
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  // magic (6) + version (2) + header length (2) + header, padded with spaces and a newline to 64.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const uint16_t hlen = static_cast<uint16_t>(header.size());
  const unsigned char len_le[2] = {static_cast<unsigned char>(hlen & 0xff), static_cast<unsigned char>(hlen >> 8)};
  bool ok = std::fwrite(magic, 1, 8, f) == 8 && std::fwrite(len_le, 1, 2, f) == 2 &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size();
  const size_t n = static_cast<size_t>(rows * cols);
  if (ok && n > 0) ok = std::fwrite(data, elem, n, f) == n;
  ok = (std::fclose(f) == 0) && ok;
  return ok;
}
}  // namespace

bool write_npy_i32(const std::string& path, const int32_t* data, int64_t rows, int64_t cols) {
  return write_npy(path, "<i4", data, 4, rows, cols);
}
bool write_npy_f32(const std::string& path, const float* data, int64_t rows, int64_t cols) {
  return write_npy(path, "<f4", data, 4, rows, cols);
}

}  // namespace fmbench
