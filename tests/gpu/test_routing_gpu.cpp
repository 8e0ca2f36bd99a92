// route_cuda against route_cpu: identical ids, weights within 1e-6 relative (by design they are
// bitwise equal; the number that are not is recorded as the test property
// "weights_not_bitwise_equal"). All modes, sizes M = 0, 1, 7, 1000 and E = 8, 64, 128, 256,
// the DeepSeek-V3 configuration, exact ties, NaN/inf, CUDA graph capture, invalid configs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
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

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define REQUIRE_GPU()                                    \
  do {                                                   \
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";   \
  } while (0)

#define CUDA_OK(expr)                                                          \
  do {                                                                         \
    const cudaError_t err_ = (expr);                                           \
    ASSERT_EQ(err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(err_); \
  } while (0)

// A device buffer; `guard` extra elements after the payload detect writes past the end.
template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t size = 0;
  explicit DeviceBuffer(size_t n) : size(n) {
    if (cudaMalloc(reinterpret_cast<void**>(&ptr), std::max<size_t>(n, 1) * sizeof(T)) != cudaSuccess) ptr = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

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

std::string describe(const RoutingConfig& c, int64_t m) {
  return "M=" + std::to_string(m) + " E=" + std::to_string(c.num_experts) + " topk=" + std::to_string(c.topk) +
         (c.score == ScoreFunction::SOFTMAX ? " softmax" : " sigmoid") + (c.renormalize ? " renorm" : "") +
         (c.correction_bias ? " bias" : "") + " groups=" + std::to_string(c.num_groups) + "/" +
         std::to_string(c.topk_groups) + " scale=" + std::to_string(c.routed_scaling_factor);
}

int64_t g_not_bitwise = 0;  // over the whole test binary, recorded per test

// Routes `logits` ([m, E], host) on both sides; `host_config.correction_bias` is a host pointer.
// Streams: a created stream, or the legacy default stream when `null_stream`.
void compare(const RoutingConfig& host_config, const std::vector<float>& logits, int64_t m,
             bool null_stream = false) {
  SCOPED_TRACE(describe(host_config, m));
  const int64_t E = host_config.num_experts, K = host_config.topk;
  ASSERT_EQ(static_cast<int64_t>(logits.size()), m * E);
  const size_t n = static_cast<size_t>(m * K);
  constexpr size_t kGuard = 64;

  std::vector<int32_t> cpu_ids(n);
  std::vector<float> cpu_w(n);
  fusedmoe::route_cpu(host_config, logits.data(), m, cpu_ids.data(), cpu_w.data());

  DeviceBuffer<float> d_logits(logits.size());
  DeviceBuffer<float> d_bias(host_config.correction_bias ? static_cast<size_t>(E) : 0);
  DeviceBuffer<int32_t> d_ids(n + kGuard);
  DeviceBuffer<float> d_w(n + kGuard);
  ASSERT_TRUE(d_logits.ptr && d_bias.ptr && d_ids.ptr && d_w.ptr);
  if (!logits.empty())
    CUDA_OK(cudaMemcpy(d_logits.ptr, logits.data(), logits.size() * sizeof(float), cudaMemcpyHostToDevice));
  RoutingConfig dev_config = host_config;
  if (host_config.correction_bias) {
    CUDA_OK(cudaMemcpy(d_bias.ptr, host_config.correction_bias, E * sizeof(float), cudaMemcpyHostToDevice));
    dev_config.correction_bias = d_bias.ptr;
  }
  CUDA_OK(cudaMemset(d_ids.ptr, 0xff, (n + kGuard) * sizeof(int32_t)));  // -1
  CUDA_OK(cudaMemset(d_w.ptr, 0xff, (n + kGuard) * sizeof(float)));      // NaN
  // cudaMemset runs on the legacy stream, which a non-blocking stream does not wait for:
  // finish the poison before the kernel can start, or it may land on top of the results.
  CUDA_OK(cudaDeviceSynchronize());

  cudaStream_t stream = nullptr;
  if (!null_stream) CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  fusedmoe::route_cuda(dev_config, m == 0 ? nullptr : d_logits.ptr, m, m == 0 ? nullptr : d_ids.ptr,
                       m == 0 ? nullptr : d_w.ptr, stream);
  CUDA_OK(cudaStreamSynchronize(stream));
  if (stream) CUDA_OK(cudaStreamDestroy(stream));

  std::vector<int32_t> gpu_ids(n + kGuard);
  std::vector<float> gpu_w(n + kGuard);
  CUDA_OK(cudaMemcpy(gpu_ids.data(), d_ids.ptr, (n + kGuard) * sizeof(int32_t), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(gpu_w.data(), d_w.ptr, (n + kGuard) * sizeof(float), cudaMemcpyDeviceToHost));

  int64_t id_mismatch = 0, w_mismatch = 0;
  for (size_t i = 0; i < n; ++i) {
    if (gpu_ids[i] != cpu_ids[i]) {
      if (++id_mismatch <= 5)
        ADD_FAILURE() << "token " << i / K << " slot " << i % K << ": gpu id " << gpu_ids[i] << ", cpu id "
                      << cpu_ids[i];
      continue;
    }
    const float a = gpu_w[i], b = cpu_w[i];
    if (std::memcmp(&a, &b, sizeof a) != 0) ++g_not_bitwise;
    if (!(std::fabs(a - b) <= 1e-6f * std::fabs(b)) && !(a == b)) {
      if (++w_mismatch <= 5)
        ADD_FAILURE() << "token " << i / K << " slot " << i % K << ": gpu weight " << a << ", cpu weight " << b;
    }
  }
  EXPECT_EQ(id_mismatch, 0);
  EXPECT_EQ(w_mismatch, 0);
  for (size_t i = n; i < n + kGuard; ++i) {
    ASSERT_EQ(gpu_ids[i], -1) << "route_cuda wrote past topk_ids[M * topk]";
    uint32_t bits;
    std::memcpy(&bits, &gpu_w[i], sizeof bits);
    ASSERT_EQ(bits, 0xffffffffu) << "route_cuda wrote past topk_weights[M * topk]";
  }
}

std::vector<float> random_logits(int64_t m, int64_t e, uint32_t seed, float lo = -4.0f, float hi = 4.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(m * e));
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<float> random_bias(int64_t e, uint32_t seed, float amp = 0.1f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-amp, amp);
  std::vector<float> v(static_cast<size_t>(e));
  for (auto& x : v) x = dist(rng);
  return v;
}

class RoutingGpu : public ::testing::Test {
 protected:
  void SetUp() override { g_not_bitwise = 0; }
  void TearDown() override { RecordProperty("weights_not_bitwise_equal", std::to_string(g_not_bitwise)); }
};

TEST_F(RoutingGpu, PlainAllModesAndSizes) {
  REQUIRE_GPU();
  uint32_t seed = 1;
  for (int64_t E : {8, 64, 128, 256}) {
    const std::vector<float> bias = random_bias(E, 1000 + static_cast<uint32_t>(E));
    for (int64_t M : {0, 1, 7, 1000})
      for (ScoreFunction f : {ScoreFunction::SOFTMAX, ScoreFunction::SIGMOID})
        for (bool renorm : {false, true})
          for (bool with_bias : {false, true})
            for (int64_t k : {int64_t{1}, int64_t{2}, std::min<int64_t>(8, E), std::min<int64_t>(16, E)}) {
              const RoutingConfig c =
                  make(E, k, f, renorm, 0, 0, with_bias ? bias.data() : nullptr, renorm ? 1.0f : 2.5f);
              compare(c, random_logits(M, E, ++seed), M);
              if (HasFatalFailure()) return;
            }
  }
}

TEST_F(RoutingGpu, GroupedAllModesAndSizes) {
  REQUIRE_GPU();
  uint32_t seed = 5000;
  struct G {
    int64_t E, groups, keep, k;
  };
  for (G g : {G{8, 4, 2, 2}, G{8, 2, 1, 4}, G{8, 8, 3, 3}, G{64, 8, 3, 6}, G{64, 16, 4, 8}, G{128, 8, 4, 8},
              G{128, 4, 2, 16}, G{256, 8, 4, 8}, G{256, 16, 2, 16}, G{256, 64, 8, 16}}) {
    const std::vector<float> bias = random_bias(g.E, 2000 + static_cast<uint32_t>(g.E + g.groups), 0.05f);
    for (int64_t M : {0, 1, 7, 1000})
      for (ScoreFunction f : {ScoreFunction::SOFTMAX, ScoreFunction::SIGMOID})
        for (bool renorm : {false, true})
          for (bool with_bias : {false, true}) {
            const RoutingConfig c = make(g.E, g.k, f, renorm, g.groups, g.keep, with_bias ? bias.data() : nullptr, 2.5f);
            compare(c, random_logits(M, g.E, ++seed, -3.0f, 3.0f), M);
            if (HasFatalFailure()) return;
          }
  }
}

TEST_F(RoutingGpu, DeepSeekV3) {
  REQUIRE_GPU();
  // E=256, top-8, 8 groups, keep 4, sigmoid with e_score_correction_bias, scaling 2.5, renorm.
  const std::vector<float> bias = random_bias(256, 77, 0.2f);
  const RoutingConfig c = make(256, 8, ScoreFunction::SIGMOID, true, 8, 4, bias.data(), 2.5f);
  for (int64_t M : {0, 1, 7, 1000, 4099}) compare(c, random_logits(M, 256, 78 + static_cast<uint32_t>(M), -6, 6), M);
  // Without renormalisation too, and on the legacy default stream.
  const RoutingConfig n = make(256, 8, ScoreFunction::SIGMOID, false, 8, 4, bias.data(), 2.5f);
  compare(n, random_logits(1000, 256, 79), 1000, /*null_stream=*/true);
}

TEST_F(RoutingGpu, LargeShapes) {
  REQUIRE_GPU();
  const std::vector<float> bias512 = random_bias(512, 80);
  compare(make(512, 16, ScoreFunction::SIGMOID, true, 16, 4, bias512.data(), 2.5f), random_logits(333, 512, 81), 333);
  compare(make(512, 16, ScoreFunction::SOFTMAX, true), random_logits(333, 512, 82), 333);
  compare(make(512, 32, ScoreFunction::SOFTMAX, false), random_logits(100, 512, 83), 100);
  // The largest E route_cuda takes (one warp per block then).
  compare(make(4096, 8, ScoreFunction::SOFTMAX, true), random_logits(50, 4096, 84, -10, 10), 50);
  compare(make(4096, 8, ScoreFunction::SIGMOID, true, 8, 2), random_logits(50, 4096, 85), 50);
  // E not a multiple of 32, tiny E.
  compare(make(60, 6, ScoreFunction::SOFTMAX, true, 6, 3), random_logits(77, 60, 86), 77);
  compare(make(7, 7, ScoreFunction::SIGMOID, false), random_logits(77, 7, 87), 77);
  compare(make(1, 1, ScoreFunction::SOFTMAX, false), random_logits(5, 1, 88), 5);
  compare(make(33, 2, ScoreFunction::SOFTMAX, true), random_logits(1000, 33, 89), 1000);
}

TEST_F(RoutingGpu, ExactTiesAndSpecialValues) {
  REQUIRE_GPU();
  // Logits from a handful of values: ties everywhere (scores, keys and group sums).
  std::mt19937 rng(90);
  std::uniform_int_distribution<int> pick(0, 5);
  const float values[6] = {-1.0f, 0.0f, 0.5f, 1.0f, 1.0f, 2.0f};
  std::vector<float> ties(static_cast<size_t>(500 * 64));
  for (auto& v : ties) v = values[pick(rng)];
  std::vector<float> qbias(64);
  for (auto& b : qbias) b = 0.125f * static_cast<float>(pick(rng) - 2);
  for (ScoreFunction f : {ScoreFunction::SOFTMAX, ScoreFunction::SIGMOID}) {
    compare(make(64, 8, f, true), ties, 500);
    compare(make(64, 8, f, true, 8, 3), ties, 500);
    compare(make(64, 8, f, true, 8, 3, qbias.data(), 2.5f), ties, 500);
    compare(make(64, 32, f, false, 0, 0, qbias.data()), ties, 500);  // 32: the kernel's topk limit
  }
  // NaN, +-inf, huge and subnormal logits sprinkled over random ones.
  std::vector<float> special = random_logits(400, 64, 91, -100.0f, 100.0f);
  const float odd[] = {kNaN, kInf, -kInf, 1e-40f, -1e-40f, 3e38f, -3e38f, 0.0f, -0.0f, 88.5f, -88.5f, 87.4f};
  std::uniform_int_distribution<size_t> where(0, special.size() - 1);
  for (int i = 0; i < 4000; ++i) special[where(rng)] = odd[i % (sizeof odd / sizeof odd[0])];
  // Whole tokens of -inf, NaN or +inf.
  for (int e = 0; e < 64; ++e) {
    special[e] = -kInf;
    special[64 + e] = kNaN;
    special[128 + e] = e % 3 ? kInf : 0.0f;
  }
  std::vector<float> odd_bias = random_bias(64, 92);
  odd_bias[3] = kNaN;
  odd_bias[10] = kInf;
  odd_bias[11] = -kInf;
  odd_bias[20] = 1e-39f;
  for (ScoreFunction f : {ScoreFunction::SOFTMAX, ScoreFunction::SIGMOID})
    for (bool renorm : {false, true}) {
      compare(make(64, 8, f, renorm), special, 400);
      compare(make(64, 8, f, renorm, 8, 4, odd_bias.data(), 2.5f), special, 400);
      compare(make(64, 16, f, renorm, 0, 0, odd_bias.data()), special, 400);
    }
}

TEST_F(RoutingGpu, GraphCapture) {
  REQUIRE_GPU();
  const int64_t M = 512, E = 256, K = 8;
  const std::vector<float> bias = random_bias(E, 93);
  const std::vector<float> logits = random_logits(M, E, 94);
  RoutingConfig c = make(E, K, ScoreFunction::SIGMOID, true, 8, 4, bias.data(), 2.5f);
  std::vector<int32_t> cpu_ids(M * K);
  std::vector<float> cpu_w(M * K);
  fusedmoe::route_cpu(c, logits.data(), M, cpu_ids.data(), cpu_w.data());

  DeviceBuffer<float> d_logits(M * E), d_bias(E), d_w(M * K);
  DeviceBuffer<int32_t> d_ids(M * K);
  ASSERT_TRUE(d_logits.ptr && d_bias.ptr && d_ids.ptr && d_w.ptr);
  CUDA_OK(cudaMemcpy(d_logits.ptr, logits.data(), M * E * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_bias.ptr, bias.data(), E * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(d_ids.ptr, 0xff, M * K * sizeof(int32_t)));
  CUDA_OK(cudaDeviceSynchronize());  // the legacy-stream memset must finish first (see compare())
  c.correction_bias = d_bias.ptr;

  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  fusedmoe::route_cuda(c, d_logits.ptr, M, d_ids.ptr, d_w.ptr, stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<int32_t> ids(M * K);
  std::vector<float> w(M * K);
  // Nothing ran during capture.
  CUDA_OK(cudaMemcpy(ids.data(), d_ids.ptr, M * K * sizeof(int32_t), cudaMemcpyDeviceToHost));
  EXPECT_EQ(ids[0], -1);
  for (int rep = 0; rep < 3; ++rep) CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaMemcpy(ids.data(), d_ids.ptr, M * K * sizeof(int32_t), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(w.data(), d_w.ptr, M * K * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(ids, cpu_ids);
  for (int64_t i = 0; i < M * K; ++i) EXPECT_NEAR(w[i], cpu_w[i], 1e-6f * std::fabs(cpu_w[i])) << i;
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(stream));
}

TEST_F(RoutingGpu, Deterministic) {
  REQUIRE_GPU();
  const int64_t M = 1000, E = 256, K = 8;
  const std::vector<float> logits = random_logits(M, E, 95);
  const RoutingConfig c = make(E, K, ScoreFunction::SOFTMAX, true, 8, 4, nullptr, 2.5f);
  DeviceBuffer<float> d_logits(M * E), d_w(M * K);
  DeviceBuffer<int32_t> d_ids(M * K);
  ASSERT_TRUE(d_logits.ptr && d_ids.ptr && d_w.ptr);
  CUDA_OK(cudaMemcpy(d_logits.ptr, logits.data(), M * E * sizeof(float), cudaMemcpyHostToDevice));
  std::vector<float> first(M * K), again(M * K);
  for (int rep = 0; rep < 2; ++rep) {
    fusedmoe::route_cuda(c, d_logits.ptr, M, d_ids.ptr, d_w.ptr, nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy((rep ? again : first).data(), d_w.ptr, M * K * sizeof(float), cudaMemcpyDeviceToHost));
  }
  EXPECT_EQ(0, std::memcmp(first.data(), again.data(), first.size() * sizeof(float)));
}

// Validation happens on the host before anything is launched: no device needed.
TEST(RoutingGpuInvalid, SameChecksAsTheCpu) {
  float* fake = reinterpret_cast<float*>(uintptr_t{256});
  int32_t* fake_ids = reinterpret_cast<int32_t*>(uintptr_t{512});
  auto field = [&](const RoutingConfig& c) -> std::string {
    try {
      fusedmoe::route_cuda(c, fake, 4, fake_ids, fake, nullptr);
    } catch (const fusedmoe::InvalidArgument& e) {
      return e.argument();
    }
    return "(no InvalidArgument)";
  };
  EXPECT_EQ(field(make(0, 1, ScoreFunction::SOFTMAX)), "num_experts");
  EXPECT_EQ(field(make(8, 9, ScoreFunction::SOFTMAX)), "topk");
  EXPECT_EQ(field(make(8, 2, ScoreFunction::SIGMOID, true, 3, 1)), "num_groups");
  EXPECT_EQ(field(make(8, 2, ScoreFunction::SIGMOID, true, 4, 5)), "topk_groups");
  EXPECT_EQ(field(make(8, 5, ScoreFunction::SIGMOID, true, 4, 2)), "topk");
  EXPECT_EQ(field(make(8, 2, ScoreFunction::SIGMOID, true, 0, 0, nullptr, kNaN)), "routed_scaling_factor");
  try {
    fusedmoe::route_cuda(make(8, 2, ScoreFunction::SOFTMAX), nullptr, 3, fake_ids, fake, nullptr);
    ADD_FAILURE() << "null logits accepted";
  } catch (const fusedmoe::InvalidArgument& e) {
    EXPECT_EQ(e.argument(), "logits");
  }
  EXPECT_NO_THROW(fusedmoe::route_cuda(make(8, 2, ScoreFunction::SOFTMAX), nullptr, 0, nullptr, nullptr, nullptr));
}

TEST(RoutingGpuInvalid, BeyondTheKernelsLimitsIsNotImplemented) {
  float* fake = reinterpret_cast<float*>(uintptr_t{256});
  int32_t* fake_ids = reinterpret_cast<int32_t*>(uintptr_t{512});
  EXPECT_THROW(fusedmoe::route_cuda(make(64, 33, ScoreFunction::SOFTMAX), fake, 4, fake_ids, fake, nullptr),
               fusedmoe::NotImplemented);
  EXPECT_THROW(fusedmoe::route_cuda(make(8192, 8, ScoreFunction::SOFTMAX), fake, 4, fake_ids, fake, nullptr),
               fusedmoe::NotImplemented);
}

}  // namespace
