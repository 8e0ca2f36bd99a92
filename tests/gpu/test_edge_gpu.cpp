// Edge cases of the CUDA backend: M = 0 and 1, experts with no tokens, every token on one
// expert, ids out of range, expert_map with -1 entries, the multi-block routing plan, shapes
// that only the SIMT fallback can do, formats the backend refuses, run_timed, determinism.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <climits>
#include <random>
#include <string>

#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

Case base_case(Format f, uint64_t seed) {
  Case c;
  c.format = f;
  c.hidden_dtype = f == Format::FP16 ? DType::F16 : f == Format::FP32 ? DType::F32 : DType::BF16;
  c.seed = seed;
  return c;
}

const Format kFormats[] = {Format::BF16, Format::FP16, Format::FP32, Format::FP8_TENSOR, Format::FP8_CHANNEL};

TEST(EdgeGpu, ZeroTokensWritesAndLaunchesNothing) {
  FMOE_REQUIRE_GPU();
  for (Format f : kFormats) {
    Case c = base_case(f, 11);
    c.M = 0;
    const LayerFile lf = make_layer(c);
    DeviceLayer dl(lf);
    Layer layer(lf.config, dl.weights);
    EXPECT_EQ(layer.workspace_size(0, c.topk), 0u);
    const Inputs in = make_inputs(c, c.E);
    DeviceRun run(layer, in);
    EXPECT_EQ(run.args.workspace, nullptr);
    EXPECT_NO_THROW(layer.run(run.args));
    const StageTimes t = layer.run_timed(run.args);
    EXPECT_EQ(t.total_ms, 0.0);
    FMOE_CUDA(cudaDeviceSynchronize());
  }
}

TEST(EdgeGpu, OneToken) {
  FMOE_REQUIRE_GPU();
  for (Format f : kFormats) {
    for (int64_t topk : {1, 4}) {
      Case c = base_case(f, 20 + topk);
      c.M = 1;
      c.topk = topk;
      c.on_input = topk == 1;  // vLLM's CUTLASS path allows the weight on input only for top-1
      check_case(c);
    }
  }
}

TEST(EdgeGpu, ExpertsWithoutTokens) {
  FMOE_REQUIRE_GPU();
  for (Format f : {Format::BF16, Format::FP8_TENSOR, Format::FP8_CHANNEL}) {
    Case c = base_case(f, 31);
    c.E = 16;
    c.topk = 2;
    check_case(c, /*num_ids=*/4);  // experts 4..15 get nothing
  }
}

TEST(EdgeGpu, AllTokensOnOneExpert) {
  FMOE_REQUIRE_GPU();
  for (Format f : kFormats) {
    Case c = base_case(f, 41);
    c.M = 300;  // 300 rows on one expert: three 128-row tiles, the last partial
    c.topk = 1;
    const LayerFile lf = make_layer(c);
    Inputs in = make_inputs(c, c.E);
    for (int64_t i = 0; i < c.M; ++i) in.ids.data<int32_t>()[i] = 5;
    check_against_oracle(c, lf, in);
  }
}

TEST(EdgeGpu, IdsOutOfRangeContributeNothing) {
  FMOE_REQUIRE_GPU();
  for (Format f : kFormats) {
    Case c = base_case(f, 51);
    c.topk = 4;
    c.bias = true;
    const LayerFile lf = make_layer(c);
    Inputs in = make_inputs(c, c.E);
    int32_t* ids = in.ids.data<int32_t>();
    const int32_t bad[] = {-1, static_cast<int32_t>(c.E), 1000, INT_MIN, INT_MAX};
    std::mt19937 rng(5);
    for (int64_t i = 0; i < c.M * c.topk; ++i)
      if (rng() % 3 == 0) ids[i] = bad[rng() % 5];
    for (int64_t k = 0; k < c.topk; ++k) ids[3 * c.topk + k] = -1;  // token 3 selects nothing: out = 0
    check_against_oracle(c, lf, in);
  }
}

TEST(EdgeGpu, ExpertMapWithUnmappedExperts) {
  FMOE_REQUIRE_GPU();
  for (Format f : kFormats) {
    for (bool on_input : {false, true}) {
      Case c = base_case(f, 61 + on_input);
      c.E = 8;  // local experts
      c.topk = 3;
      c.on_input = on_input;
      const int64_t E_global = 16;
      const LayerFile lf = make_layer(c);
      Inputs in = make_inputs(c, E_global);
      in.has_map = true;
      in.expert_map = HostTensor(DType::I32, {E_global});
      // Even global ids live here (local g / 2, in reverse order), odd ones on another rank.
      for (int64_t g = 0; g < E_global; ++g)
        in.expert_map.data<int32_t>()[g] = g % 2 == 0 ? static_cast<int32_t>(c.E - 1 - g / 2) : -1;
      in.ids.data<int32_t>()[0] = static_cast<int32_t>(E_global);  // past the map: nothing
      in.ids.data<int32_t>()[1] = -7;
      check_against_oracle(c, lf, in);
    }
  }
}

// More than 1024 slots: the three-kernel plan (count, scan, place) with invalid ids mixed in.
TEST(EdgeGpu, MultiBlockPlan) {
  FMOE_REQUIRE_GPU();
  for (Format f : {Format::BF16, Format::FP8_TENSOR, Format::FP8_CHANNEL}) {
    Case c = base_case(f, 71);
    c.M = 1500;
    c.topk = 3;
    c.E = 40;
    c.K = 128;
    c.N = 64;
    const LayerFile lf = make_layer(c);
    Inputs in = make_inputs(c, c.E + 3);  // ids E..E+2 are out of range
    check_against_oracle(c, lf, in);
  }
}

// K and N whose rows are not 16-byte multiples: TMA cannot address them, the SIMT path runs.
TEST(EdgeGpu, UnalignedShapesUseFallback) {
  FMOE_REQUIRE_GPU();
  for (Format f : kFormats) {
    for (Activation a : {Activation::SILU, Activation::RELU2}) {
      Case c = base_case(f, 81);
      c.K = 100;
      c.N = 52;
      c.act = a;
      c.bias = true;
      check_case(c);
    }
  }
}

TEST(EdgeGpu, ManyExpertsLargeTopk) {
  FMOE_REQUIRE_GPU();
  for (Format f : {Format::BF16, Format::FP8_CHANNEL}) {
    Case c = base_case(f, 91);
    c.M = 5;
    c.E = 64;
    c.topk = 8;
    check_case(c);
  }
}

TEST(EdgeGpu, TwoRunsBitwiseIdentical) {
  FMOE_REQUIRE_GPU();
  for (Format f : kFormats) {
    Case c = base_case(f, 101);
    c.M = 2000;
    c.E = 32;
    c.topk = 4;
    c.K = 128;
    c.N = 128;
    const LayerFile lf = make_layer(c);
    const Inputs in = make_inputs(c, c.E);
    DeviceLayer dl(lf);
    Layer layer(lf.config, dl.weights);
    const HostTensor a = run_gpu(layer, in);
    const HostTensor b = run_gpu(layer, in);
    EXPECT_TRUE(test::bitwise_equal(a, b)) << format_name(f);
  }
}

// Decode-sized calls chain their kernels with PDL, and the routing plan is built inside the gather
// kernel: a kernel that read the plan before its chain_wait() would see the previous call's plan.
// Two routings alternate on one workspace and one stream with no synchronisation between the
// calls; every output must equal that routing's own result. At M = 2, top-4: E = 16 takes the
// unfused small-M GEMM1 (whose weight loads start before its wait), E = 64 the decode fusions
// (bf16: the plan inside the gather, then the fused GEMM1 + activation).
TEST(EdgeGpu, AlternatingRoutingsBackToBack) {
  FMOE_REQUIRE_GPU();
  cudaStream_t stream;
  FMOE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (Format f : {Format::BF16, Format::FP8_TENSOR, Format::FP8_CHANNEL}) {
    for (int64_t E : {16, 64}) {
      Case c = base_case(f, 131);
      c.M = 2;
      c.E = E;
      c.topk = 4;
      c.K = 512;
      c.N = 256;
      Case cb = c;
      cb.seed = 132;
      const LayerFile lf = make_layer(c);
      const Inputs a = make_inputs(c, c.E), b = make_inputs(cb, c.E);
      DeviceLayer dl(lf);
      Layer layer(lf.config, dl.weights);
      const HostTensor ref_a = run_gpu(layer, a, stream), ref_b = run_gpu(layer, b, stream);
      DeviceRun ra(layer, a), rb(layer, b);
      ra.args.stream = rb.args.stream = stream;
      rb.args.workspace = ra.args.workspace;  // one workspace: the plan of the previous call is there
      for (int it = 0; it < 50; ++it) {
        ra.poison(stream);
        rb.poison(stream);
        layer.run(ra.args);
        layer.run(rb.args);
        FMOE_CUDA(cudaStreamSynchronize(stream));
        ASSERT_TRUE(test::bitwise_equal(ref_a, ra.result(a)))
            << format_name(f) << " E=" << E << " routing A, iteration " << it;
        ASSERT_TRUE(test::bitwise_equal(ref_b, rb.result(b)))
            << format_name(f) << " E=" << E << " routing B, iteration " << it;
      }
    }
  }
  FMOE_CUDA(cudaStreamDestroy(stream));
}

TEST(EdgeGpu, RunTimedMatchesRun) {
  FMOE_REQUIRE_GPU();
  for (Format f : {Format::BF16, Format::FP8_TENSOR}) {
    Case c = base_case(f, 111);
    c.M = 64;
    const LayerFile lf = make_layer(c);
    const Inputs in = make_inputs(c, c.E);
    DeviceLayer dl(lf);
    Layer layer(lf.config, dl.weights);
    const HostTensor plain = run_gpu(layer, in);
    DeviceRun run(layer, in);
    run.poison();
    const StageTimes t = layer.run_timed(run.args);
    EXPECT_GT(t.total_ms, 0.0);
    EXPECT_GT(t.gemm1_ms, 0.0);
    EXPECT_GT(t.gemm2_ms, 0.0);
    EXPECT_GE(t.total_ms, t.gemm1_ms + t.gemm2_ms);
    EXPECT_TRUE(test::bitwise_equal(plain, run.result(in)));
  }
}

TEST(EdgeGpu, WorkspaceTooSmallIsRejected) {
  FMOE_REQUIRE_GPU();
  Case c = base_case(Format::BF16, 131);
  const LayerFile lf = make_layer(c);
  DeviceLayer dl(lf);
  Layer layer(lf.config, dl.weights);
  const Inputs in = make_inputs(c, c.E);
  DeviceRun run(layer, in);
  run.args.workspace_bytes -= 1;
  EXPECT_THROW(layer.run(run.args), InvalidArgument);
}

}  // namespace
}  // namespace fusedmoe::gputest
