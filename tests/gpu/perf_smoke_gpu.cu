// A quick timing of the CUDA backend's stages on model-sized layers (not a benchmark: the
// benchmark program does that properly). Disabled by default; run with
//   fusedmoe_gpu_tests --gtest_also_run_disabled_tests --gtest_filter='PerfSmoke*'
// Weights are filled on the device by a hash (host-side generation of GB-sized layers is slow),
// routing is uniform random. Prints per-stage times (run_timed, median of the repeats), the
// time of the whole layer replayed as a CUDA graph, and the graph's rate against two floors:
// bytes of the weights of the experts actually hit, and the FLOPs.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <set>
#include <vector>

#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

__device__ float hash_uniform(uint64_t i, uint64_t seed) {
  uint64_t z = i * 0x9E3779B97F4A7C15ull + seed;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;  // [-1, 1)
}

__global__ void fill_kernel(void* p, DType dt, int64_t n, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = hash_uniform(i, seed) * scale;
    if (dt == DType::BF16) static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
    else if (dt == DType::F32) static_cast<float*>(p)[i] = v;
    else static_cast<__nv_fp8_e4m3*>(p)[i] = __nv_fp8_e4m3(v);
  }
}

void fill(void* p, DType dt, int64_t n, uint64_t seed, float scale) {
  fill_kernel<<<1024, 256>>>(p, dt, n, seed, scale);
  FMOE_CUDA(cudaGetLastError());
}

struct Shape {
  const char* name;
  int64_t E, K, N, topk;
};

void time_layer(const Shape& s, Format f, const std::vector<int64_t>& Ms) {
  const bool fp8 = f == Format::FP8_CHANNEL;
  const DType wt = fp8 ? DType::F8_E4M3 : DType::BF16;
  const int64_t R = 2 * s.N;
  DeviceBuffer w13(size_t(s.E * R * s.K) * dtype_size(wt)), w2(size_t(s.E * s.K * s.N) * dtype_size(wt));
  fill(w13.get(), wt, s.E * R * s.K, 1, fp8 ? 100.0f : 0.02f);
  fill(w2.get(), wt, s.E * s.K * s.N, 2, fp8 ? 100.0f : 0.02f);
  DeviceBuffer s13, s2;
  LayerWeights w;
  w.w13_weight = TensorView::contiguous(w13.get(), wt, {s.E, R, s.K}, DeviceType::CUDA);
  w.w2_weight = TensorView::contiguous(w2.get(), wt, {s.E, s.K, s.N}, DeviceType::CUDA);
  if (fp8) {
    s13 = DeviceBuffer(size_t(s.E * R) * 4);
    s2 = DeviceBuffer(size_t(s.E * s.K) * 4);
    fill(s13.get(), DType::F32, s.E * R, 3, 1e-4f);
    fill(s2.get(), DType::F32, s.E * s.K, 4, 1e-4f);
    w.w13_weight_scale = TensorView::contiguous(s13.get(), DType::F32, {s.E, R}, DeviceType::CUDA);
    w.w2_weight_scale = TensorView::contiguous(s2.get(), DType::F32, {s.E, s.K}, DeviceType::CUDA);
  }
  LayerConfig cfg;
  cfg.format = f;
  Layer layer(cfg, w);
  for (int64_t M : Ms) {
    Case c;
    c.M = M;
    c.K = s.K;
    c.topk = s.topk;
    c.hidden_dtype = DType::BF16;
    const Inputs in = make_inputs(c, s.E);
    std::set<int32_t> hit(in.ids.data<int32_t>(), in.ids.data<int32_t>() + M * s.topk);
    DeviceRun run(layer, in);
    layer.run(run.args);  // warm-up
    std::vector<StageTimes> ts;
    for (int i = 0; i < 7; ++i) ts.push_back(layer.run_timed(run.args));
    auto med = [&](double StageTimes::*m) {
      std::vector<double> v;
      for (auto& t : ts) v.push_back(t.*m);
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    // The whole layer as one CUDA graph (how decode runs it): mean of 20 replays.
    cudaStream_t stream;
    FMOE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    run.args.stream = stream;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    FMOE_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    layer.run(run.args);
    FMOE_CUDA(cudaStreamEndCapture(stream, &graph));
    FMOE_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    FMOE_CUDA(cudaGraphLaunch(exec, stream));
    cudaEvent_t e0, e1;
    FMOE_CUDA(cudaEventCreate(&e0));
    FMOE_CUDA(cudaEventCreate(&e1));
    FMOE_CUDA(cudaEventRecord(e0, stream));
    for (int i = 0; i < 20; ++i) FMOE_CUDA(cudaGraphLaunch(exec, stream));
    FMOE_CUDA(cudaEventRecord(e1, stream));
    FMOE_CUDA(cudaEventSynchronize(e1));
    float graph_ms = 0;
    FMOE_CUDA(cudaEventElapsedTime(&graph_ms, e0, e1));
    graph_ms /= 20;
    FMOE_CUDA(cudaEventDestroy(e0));
    FMOE_CUDA(cudaEventDestroy(e1));
    FMOE_CUDA(cudaGraphExecDestroy(exec));
    FMOE_CUDA(cudaGraphDestroy(graph));
    FMOE_CUDA(cudaStreamDestroy(stream));
    const double bytes = double(hit.size()) * double(R * s.K + s.K * s.N) * dtype_size(wt);
    const double flops = 2.0 * double(M * s.topk) * double(s.K * R + s.N * s.K);
    const double total = med(&StageTimes::total_ms);
    std::printf("%-14s %-11s M=%-5lld | permute %7.3f gemm1 %7.3f act %7.3f gemm2 %7.3f fin %7.3f | total %8.3f ms"
                " | graph %8.3f ms %6.0f GB/s %6.1f TFLOP/s\n",
                s.name, format_name(f), static_cast<long long>(M), med(&StageTimes::permute_ms), med(&StageTimes::gemm1_ms),
                med(&StageTimes::activation_ms), med(&StageTimes::gemm2_ms), med(&StageTimes::finalize_ms), total,
                graph_ms, bytes / graph_ms * 1e-6, flops / graph_ms * 1e-9);
  }
}

TEST(PerfSmoke, DISABLED_StageTimes) {
  FMOE_REQUIRE_GPU();
  const Shape shapes[] = {{"mixtral-8x7b", 8, 4096, 14336, 2}, {"qwen3-30b-a3b", 128, 2048, 768, 8},
                          {"deepseek-v3", 256, 7168, 2048, 8}};
  const std::vector<int64_t> Ms = {1, 8, 64, 512, 4096};
  for (const Shape& s : shapes) {
    if (std::string(s.name) != "deepseek-v3") time_layer(s, Format::BF16, Ms);
    time_layer(s, Format::FP8_CHANNEL, Ms);
  }
}

}  // namespace
}  // namespace fusedmoe::gputest
