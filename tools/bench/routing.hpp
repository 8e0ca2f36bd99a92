#pragma once
// Synthetic routing (host): topk ids and weights for a routing distribution, the .npy files the
// peers read, and the counts the roofline needs (valid slots, distinct local experts hit).
#include <cstdint>
#include <string>
#include <vector>

namespace fmbench {

enum class RoutingDist : uint8_t {
  UNIFORM,   // each token: topk distinct experts, uniformly at random
  ZIPF,      // each token: topk distinct experts drawn with probability ~ 1/rank^s (random ranks)
  ONE,       // every token on the same topk experts (expert 0 gets every token: all on one expert)
  BALANCED,  // slot i = t*topk + k goes to expert i mod E: every expert gets the same count (+-1)
};
const char* routing_name(RoutingDist d);
bool routing_from_name(const std::string& s, RoutingDist* out);
std::vector<RoutingDist> all_routings();

struct Routing {
  int64_t M = 0, topk = 0;
  std::vector<int32_t> ids;     // [M, topk] global expert ids
  std::vector<float> weights;   // [M, topk], positive; sum 1 per token for topk > 1
};

// Deterministic for (dist, M, topk, E, zipf_s, seed).
Routing make_routing(RoutingDist dist, int64_t M, int64_t topk, int64_t E, double zipf_s, uint64_t seed);

// The expert map of rank 0 of `ep` ranks: global g -> g if g < E/ep, else -1. Empty when ep == 1.
std::vector<int32_t> make_expert_map(int64_t E, int64_t ep);

struct SlotCounts {
  int64_t valid_slots = 0;          // slots whose expert is held by this layer
  std::vector<int32_t> experts_hit;  // distinct local experts hit, ascending
  int64_t max_tokens_per_expert = 0;
};
SlotCounts count_slots(const Routing& r, const std::vector<int32_t>& expert_map, int64_t local_experts);

// Local expert of a global id (-1: selects nothing on this rank).
inline int32_t local_expert(int32_t g, const std::vector<int32_t>& expert_map, int64_t local_experts) {
  if (expert_map.empty()) return (g >= 0 && g < local_experts) ? g : -1;
  if (g < 0 || g >= static_cast<int64_t>(expert_map.size())) return -1;
  return expert_map[g];
}

// NumPy .npy (format 1.0), little-endian, C order. Return false on an I/O error.
bool write_npy_i32(const std::string& path, const int32_t* data, int64_t rows, int64_t cols);
bool write_npy_f32(const std::string& path, const float* data, int64_t rows, int64_t cols);

// Small deterministic generator (splitmix64) for host-side choices.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next();
  double uniform();  // [0, 1)
  uint64_t below(uint64_t n);  // [0, n)

 private:
  uint64_t s_;
};

uint64_t hash_combine(uint64_t a, uint64_t b);
uint64_t hash_string(const std::string& s);

}  // namespace fmbench
