// route_cuda: the router of src/routing/routing_cpu.cpp on the GPU, one warp per token.
//
// Bitwise agreement with route_cpu is by construction: the same fp32 operations in the same
// order (see the comment at the top of routing_cpu.cpp). Here every arithmetic step uses the
// explicitly rounded intrinsics (__fadd_rn, __fmul_rn, __fdiv_rn, __fmaf_rn) so neither FMA
// contraction nor --use_fast_math (approximate division) changes a result, and subnormals are
// flushed by hand so -ftz=true agrees with the CPU. CUDA's expf/__expf are not used: they can
// differ from libm's expf by an ulp or two; both sides use the same fixed_exp instead.
// Keep the two files in step (tests/gpu/test_routing_gpu.cpp compares them).
//
// Per warp, dynamic shared memory holds key[E], score[E] and group_score[G]. Lane l owns the
// experts l, l+32, ... (and groups l, l+32, ...). Selection marks a taken expert or group by
// writing NaN over its key (real keys are never NaN: NaN counts as -inf).
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>

#include "cuda/chained_launch.cuh"
#include "fusedmoe/error.hpp"
#include "fusedmoe/routing.hpp"

namespace fusedmoe {
namespace detail {
// Defined in src/routing/routing_cpu.cpp (always part of the library).
void validate_routing(const RoutingConfig& c, const float* logits, int64_t num_tokens,
                      const int32_t* topk_ids, const float* topk_weights);
}  // namespace detail

namespace {

using cuda::chain_wait;
using cuda::launch_chained;

constexpr int kWarp = 32;
constexpr int kMaxTopk = 32;                 // lane k holds output k
constexpr int64_t kMaxExperts = 4096;        // (2 * E + num_groups) floats <= 48 KiB per warp
constexpr size_t kMaxSmemBytes = 48 * 1024;  // no opt-in needed
constexpr int kMaxWarpsPerBlock = 4;
constexpr unsigned kFull = 0xffffffffu;

struct RouteParams {
  const float* logits;
  const float* bias;  // nullable
  int32_t* ids;
  float* weights;
  int64_t num_tokens;
  int E;
  int topk;
  int G;  // 0 = plain top-k
  int GK;
  int gsize;
  int softmax;  // 1 softmax, 0 sigmoid
  int renormalize;
  float factor;
  int stride;  // floats of shared memory per warp
};

__device__ __forceinline__ float d_inf() { return __int_as_float(0x7f800000); }
__device__ __forceinline__ float d_flush(float x) { return (x > -0x1p-126f && x < 0x1p-126f) ? 0.0f : x; }
__device__ __forceinline__ float d_nan_to_neginf(float x) { return x == x ? x : -d_inf(); }
__device__ __forceinline__ float d_pow2i(int k) { return __int_as_float((k + 127) << 23); }

// Same as fixed_exp in routing_cpu.cpp.
__device__ float d_fixed_exp(float x) {
  x = d_flush(x);
  if (x != x) return x;
  if (x > 89.0f) return d_inf();
  if (x < -88.0f) return 0.0f;
  const float n = rintf(__fmul_rn(x, 0x1.715476p+0f));
  float r = __fmaf_rn(-n, 0x1.62e430p-1f, x);
  r = __fmaf_rn(-n, -0x1.05c610p-29f, r);
  float p = 0x1.a01a02p-13f;
  p = __fmaf_rn(p, r, 0x1.6c16c2p-10f);
  p = __fmaf_rn(p, r, 0x1.111112p-7f);
  p = __fmaf_rn(p, r, 0x1.555556p-5f);
  p = __fmaf_rn(p, r, 0x1.555556p-3f);
  p = __fmaf_rn(p, r, 0.5f);
  p = __fmaf_rn(p, r, 1.0f);
  p = __fmaf_rn(p, r, 1.0f);
  const int ni = static_cast<int>(n);
  const int n1 = ni / 2;
  const int n2 = ni - n1;
  return d_flush(__fmul_rn(__fmul_rn(p, d_pow2i(n1)), d_pow2i(n2)));
}

__device__ __forceinline__ float d_fixed_sigmoid(float x) {
  return d_flush(__fdiv_rn(1.0f, __fadd_rn(1.0f, d_fixed_exp(-x))));
}

__device__ __forceinline__ bool d_ranks_before(float ka, int ia, float kb, int ib) {
  return ka > kb || (ka == kb && ia < ib);
}

// Warp-wide best (key, index); every lane gets the same answer (the order is total).
__device__ __forceinline__ void d_warp_best(float& key, int& idx) {
#pragma unroll
  for (int off = kWarp / 2; off >= 1; off /= 2) {
    const float ok = __shfl_xor_sync(kFull, key, off);
    const int oi = __shfl_xor_sync(kFull, idx, off);
    if (d_ranks_before(ok, oi, key, idx)) {
      key = ok;
      idx = oi;
    }
  }
}

__global__ void route_kernel(RouteParams p) {
  chain_wait();
  extern __shared__ float smem[];
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  const int wpb = blockDim.x / kWarp;
  float* key = smem + static_cast<size_t>(warp) * p.stride;
  float* score = key + p.E;
  float* gscore = score + p.E;
  const int E = p.E;

  // The loop bound is warp-uniform, so the whole warp stays converged for the shuffles.
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * wpb + warp; t < p.num_tokens;
       t += static_cast<int64_t>(gridDim.x) * wpb) {
    const float* lt = p.logits + t * E;

    // ---- scores ----
    if (p.softmax) {
      float m = -d_inf();
      for (int e = lane; e < E; e += kWarp) {
        const float x = d_flush(d_nan_to_neginf(lt[e]));
        score[e] = x;  // the cleaned logit, until it is replaced by its exp below
        m = x > m ? x : m;
      }
#pragma unroll
      for (int off = kWarp / 2; off >= 1; off /= 2) {
        const float o = __shfl_xor_sync(kFull, m, off);
        m = o > m ? o : m;
      }
      float part = 0.0f;
      for (int e = lane; e < E; e += kWarp) {
        const float x = score[e];
        const float d = x == m ? 0.0f : __fsub_rn(x, m);
        const float ex = d_fixed_exp(d);
        score[e] = ex;
        part = __fadd_rn(part, ex);
      }
#pragma unroll
      for (int off = kWarp / 2; off >= 1; off /= 2) part = __fadd_rn(part, __shfl_xor_sync(kFull, part, off));
      for (int e = lane; e < E; e += kWarp) score[e] = d_flush(__fdiv_rn(score[e], part));
    } else {
      for (int e = lane; e < E; e += kWarp) score[e] = d_fixed_sigmoid(d_flush(d_nan_to_neginf(lt[e])));
    }

    // ---- selection keys (each lane writes only its own experts) ----
    for (int e = lane; e < E; e += kWarp)
      key[e] = p.bias ? d_nan_to_neginf(d_flush(__fadd_rn(score[e], d_flush(p.bias[e])))) : score[e];
    __syncwarp();

    // ---- groups ----
    if (p.G > 0) {
      for (int g = lane; g < p.G; g += kWarp) {
        float a = -d_inf(), b = -d_inf();
        const int lo = g * p.gsize, hi = lo + p.gsize;
        for (int i = lo; i < hi; ++i) {
          const float v = key[i];
          if (v > a) {
            b = a;
            a = v;
          } else if (v > b) {
            b = v;
          }
        }
        gscore[g] = p.gsize >= 2 ? d_nan_to_neginf(d_flush(__fadd_rn(a, b))) : key[lo];
      }
      // Pick topk_groups groups; a kept group is marked by NaN in gscore.
      for (int it = 0; it < p.GK; ++it) {
        float bk = -d_inf();
        int bi = INT_MAX;
        for (int g = lane; g < p.G; g += kWarp) {
          const float v = gscore[g];
          if (v == v && d_ranks_before(v, g, bk, bi)) {
            bk = v;
            bi = g;
          }
        }
        d_warp_best(bk, bi);
        if ((bi % kWarp) == lane) gscore[bi] = __int_as_float(0x7fc00000);
      }
      __syncwarp();
      // Experts of the groups not kept leave the race.
      for (int e = lane; e < E; e += kWarp) {
        const float gv = gscore[e / p.gsize];
        if (gv == gv) key[e] = __int_as_float(0x7fc00000);
      }
      __syncwarp();
    }

    // ---- experts: topk rounds of warp argmax ----
    int my_id = 0;
    float my_score = 0.0f;
    float sum = 0.0f;
    for (int k = 0; k < p.topk; ++k) {
      float bk = -d_inf();
      int bi = INT_MAX;
      for (int e = lane; e < E; e += kWarp) {
        const float v = key[e];
        if (v == v && d_ranks_before(v, e, bk, bi)) {
          bk = v;
          bi = e;
        }
      }
      d_warp_best(bk, bi);
      const float s = score[bi];
      sum = __fadd_rn(sum, s);
      if (lane == k) {
        my_id = bi;
        my_score = s;
      }
      if ((bi % kWarp) == lane) key[bi] = __int_as_float(0x7fc00000);
    }

    // ---- weights ----
    if (lane < p.topk) {
      float w = my_score;
      if (p.renormalize && sum > 0.0f) w = d_flush(__fdiv_rn(w, sum));
      w = d_flush(__fmul_rn(w, p.factor));
      p.ids[t * p.topk + lane] = my_id;
      p.weights[t * p.topk + lane] = w;
    }
    __syncwarp();  // shared memory is reused by the next token of this warp
  }
}

}  // namespace

void route_cuda(const RoutingConfig& config, const float* logits, int64_t num_tokens,
                int32_t* topk_ids, float* topk_weights, void* stream) {
  detail::validate_routing(config, logits, num_tokens, topk_ids, topk_weights);
  const int64_t E = config.num_experts;
  const int64_t G = config.num_groups;
  if (config.topk > kMaxTopk)
    throw NotImplemented("route_cuda: topk " + std::to_string(config.topk) + " > " + std::to_string(kMaxTopk) +
                         " is not supported");
  if (E > kMaxExperts)
    throw NotImplemented("route_cuda: num_experts " + std::to_string(E) + " > " + std::to_string(kMaxExperts) +
                         " is not supported (one warp per token keeps 2 * E + num_groups floats in shared memory)");
  const int64_t stride = 2 * E + G;  // <= 3 * 4096 floats = 48 KiB
  if (num_tokens == 0) return;

  int wpb = kMaxWarpsPerBlock;
  while (wpb > 1 && static_cast<size_t>(wpb) * stride * sizeof(float) > kMaxSmemBytes) wpb /= 2;
  const size_t smem = static_cast<size_t>(wpb) * stride * sizeof(float);
  const int64_t blocks_needed = (num_tokens + wpb - 1) / wpb;
  const unsigned grid = static_cast<unsigned>(blocks_needed < 0x7fffffff ? blocks_needed : 0x7fffffff);

  RouteParams p;
  p.logits = logits;
  p.bias = config.correction_bias;
  p.ids = topk_ids;
  p.weights = topk_weights;
  p.num_tokens = num_tokens;
  p.E = static_cast<int>(E);
  p.topk = static_cast<int>(config.topk);
  p.G = static_cast<int>(G);
  p.GK = static_cast<int>(config.topk_groups);
  p.gsize = G > 0 ? static_cast<int>(E / G) : static_cast<int>(E);
  p.softmax = config.score == ScoreFunction::SOFTMAX ? 1 : 0;
  p.renormalize = config.renormalize ? 1 : 0;
  p.factor = config.routed_scaling_factor;
  p.stride = static_cast<int>(stride);

  launch_chained(route_kernel, grid, wpb * kWarp, smem, static_cast<cudaStream_t>(stream), p);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw Error(std::string("route_cuda: kernel launch failed: ") + cudaGetErrorString(err));
}

}  // namespace fusedmoe
