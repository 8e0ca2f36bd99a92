// The CUDA backend's pre-quantised fp8-block inputs, batched/masked layout and warm-up:
// against the float64 CPU oracle, bitwise against the in-layer quantisation, graph capture with
// bitwise replay, counts 0 / full / ragged, and the refusals.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "fusedmoe/quantize.hpp"
#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

float value_of(const HostTensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::F32: return t.data<float>()[i];
    case DType::BF16: return bf16_bits_to_float(t.data<uint16_t>()[i]);
    case DType::F16: return fp16_bits_to_float(t.data<uint16_t>()[i]);
    default: return NAN;
  }
}

struct Quantised {
  HostTensor codes, scales;
};
Quantised quantise_groups(const HostTensor& x, bool ue8m0) {
  const int64_t K = x.shape.back(), rows = x.numel() / K, G = (K + 127) / 128;
  std::vector<float> f(static_cast<size_t>(rows * K));
  for (int64_t i = 0; i < rows * K; ++i) f[i] = value_of(x, i);
  std::vector<int64_t> sshape = x.shape;
  sshape.back() = G;
  Quantised q{HostTensor(DType::F8_E4M3, x.shape), HostTensor(DType::F32, sshape)};
  quantize_fp8_per_token_group(f.data(), rows, K, 128, ue8m0, q.codes.data<uint8_t>(), q.scales.data<float>());
  return q;
}

HostTensor download_as(const DeviceBuffer& b, DType d, std::vector<int64_t> shape) {
  HostTensor h(d, std::move(shape));
  if (!h.bytes.empty()) b.download(h.bytes.data(), h.bytes.size());
  return h;
}

// Runs `launch` on a fresh stream into a poisoned output, then once more captured in a graph and
// replayed into a re-poisoned output; returns the first output and checks the replay is bitwise.
template <class Launch>
HostTensor run_twice(Launch launch, DeviceBuffer& out, DType d, const std::vector<int64_t>& shape) {
  cudaStream_t s;
  FMOE_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (out.bytes()) FMOE_CUDA(cudaMemsetAsync(out.get(), 0xFF, out.bytes(), s));
  launch(s);
  FMOE_CUDA(cudaStreamSynchronize(s));
  const HostTensor first = download_as(out, d, shape);
  cudaGraph_t g;
  cudaGraphExec_t ge;
  FMOE_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  launch(s);
  FMOE_CUDA(cudaStreamEndCapture(s, &g));
  FMOE_CUDA(cudaGraphInstantiate(&ge, g, 0));
  if (out.bytes()) FMOE_CUDA(cudaMemsetAsync(out.get(), 0xFF, out.bytes(), s));
  FMOE_CUDA(cudaGraphLaunch(ge, s));
  FMOE_CUDA(cudaStreamSynchronize(s));
  const HostTensor replay = download_as(out, d, shape);
  FMOE_CUDA(cudaGraphExecDestroy(ge));
  FMOE_CUDA(cudaGraphDestroy(g));
  FMOE_CUDA(cudaStreamDestroy(s));
  EXPECT_TRUE(test::bitwise_equal(first, replay)) << "graph replay differs from the first run";
  return first;
}

// ---------------------------------------------------------------- A: pre-quantised inputs

// Codes + scales quantised on the host give bitwise the GPU output of the bf16 inputs (the
// layer's own quantiser is bitwise the host codec); the output matches the oracle's
// pre-quantised run; F32 output too.
TEST(PrequantizedGpu, EqualsInLayerQuantisationAndOracle) {
  FMOE_REQUIRE_GPU();
  for (bool ue8m0 : {false, true})
    for (int64_t M : {int64_t(1), int64_t(37), int64_t(300)}) {
      Case c;
      c.format = Format::FP8_BLOCK;
      c.M = M;
      c.K = 512;
      c.N = 256;
      c.E = 8;
      c.topk = 2;
      c.seed = 40 + M;
      SCOPED_TRACE(describe(c) + (ue8m0 ? " ue8m0" : ""));
      LayerFile lf = make_layer(c);
      lf.config.fp8_block_ue8m0 = ue8m0;
      const Inputs in = make_inputs(c, c.E);
      DeviceLayer dl(lf);
      Layer layer(lf.config, dl.weights);
      const HostTensor plain = run_gpu(layer, in);
      const Quantised q = quantise_groups(in.hidden, ue8m0);
      for (DType od : {DType::BF16, DType::F32}) {
        DeviceRun run(layer, in);
        DeviceTensor codes(q.codes), scales(q.scales);
        DeviceBuffer out(static_cast<size_t>(M * c.K) * dtype_size(od));
        run.args.hidden_states = codes.view;
        run.args.hidden_states_scale = scales.view;
        run.args.output = TensorView::contiguous(out.get(), od, {M, c.K}, DeviceType::CUDA);
        ASSERT_TRUE(layer.can_implement(layer.validate(run.args)).ok);
        const HostTensor got = run_twice(
            [&](cudaStream_t s) {
              RunArgs a = run.args;
              a.stream = s;
              layer.run(a);
            },
            out, od, {M, c.K});
        // The oracle on the same codes and scales.
        Layer cpu(lf.config, lf.weights(), LayerOptions{Backend::CPU, 0, CpuPrecision::ORACLE_FP64});
        HostTensor ref(od, {M, c.K});
        RunArgs ra = test::make_args(in, ref);
        ra.hidden_states = q.codes.view();
        ra.hidden_states_scale = q.scales.view();
        cpu.run(ra);
        const double err = test::rel_error(test::to_double(got), test::to_double(ref));
        std::printf("[ rel-err  ] %.3g prequantized out=%s %s%s\n", err, dtype_name(od), describe(c).c_str(),
                    ue8m0 ? " ue8m0" : "");
        EXPECT_TRUE(matches_oracle(got, ref, 5e-2));
        if (od == DType::BF16) EXPECT_TRUE(test::bitwise_equal(got, plain)) << "differs from the in-layer quantisation";
      }
    }
}

// ---------------------------------------------------------------- B: the masked layout

struct MaskedGpuCase {
  Format format;
  bool prequantized;
  int64_t E, T, K, N;
  std::vector<int32_t> counts;
  const char* name;
};

void check_masked(const MaskedGpuCase& mc) {
  SCOPED_TRACE(std::string(mc.name) + " " + format_name(mc.format) + (mc.prequantized ? " prequantized" : ""));
  Case c;
  c.format = mc.format;
  c.E = mc.E;
  c.K = mc.K;
  c.N = mc.N;
  c.seed = 77 + mc.T;
  const LayerFile lf = make_layer(c);
  DeviceLayer dl(lf);
  Layer layer(lf.config, dl.weights);
  const int64_t E = mc.E, T = mc.T, K = mc.K;
  // Hidden [E, T, K] bf16; rows past the count hold large garbage.
  const Inputs r = test::random_inputs(E * T, K, 1, 1, DType::BF16, 5 + T);
  HostTensor x(DType::BF16, {E, T, K});
  x.bytes = r.hidden.bytes;
  for (int64_t e = 0; e < E; ++e)
    for (int64_t t = std::max<int32_t>(mc.counts[e], 0); t < T; ++t)
      for (int64_t k = 0; k < K; ++k) x.data<uint16_t>()[(e * T + t) * K + k] = float_to_bf16_bits(3.0e4f);
  HostTensor cnt(DType::I32, {E});
  std::memcpy(cnt.bytes.data(), mc.counts.data(), 4 * E);
  Quantised q;
  if (mc.prequantized) q = quantise_groups(x, false);

  DeviceTensor xd(mc.prequantized ? q.codes : x), cd(cnt);
  DeviceTensor sd;
  if (mc.prequantized) sd = DeviceTensor(q.scales);
  DeviceBuffer out(static_cast<size_t>(E * T * K) * 2);
  DeviceBuffer ws(layer.masked_workspace_size(T));
  MaskedArgs m;
  m.hidden_states = xd.view;
  if (mc.prequantized) m.hidden_states_scale = sd.view;
  m.expert_num_tokens = cd.view;
  m.output = TensorView::contiguous(out.get(), DType::BF16, {E, T, K}, DeviceType::CUDA);
  m.workspace = ws.get();
  m.workspace_bytes = ws.bytes();
  const Support s = layer.can_implement_masked(layer.validate_masked(m));
  ASSERT_TRUE(s.ok) << s.reason;
  const HostTensor got = run_twice(
      [&](cudaStream_t st) {
        MaskedArgs a = m;
        a.stream = st;
        layer.run_masked(a);
      },
      out, DType::BF16, {E, T, K});

  Layer cpu(lf.config, lf.weights(), LayerOptions{Backend::CPU, 0, CpuPrecision::ORACLE_FP64});
  HostTensor ref(DType::BF16, {E, T, K});
  MaskedArgs mc_cpu;
  mc_cpu.hidden_states = mc.prequantized ? q.codes.view() : x.view();
  if (mc.prequantized) mc_cpu.hidden_states_scale = q.scales.view();
  mc_cpu.expert_num_tokens = cnt.view();
  mc_cpu.output = ref.view();
  cpu.run_masked(mc_cpu);
  const double err = test::rel_error(test::to_double(got), test::to_double(ref));
  std::printf("[ rel-err  ] %.3g masked %s %s%s E=%lld T=%lld K=%lld N=%lld\n", err, mc.name, format_name(mc.format),
              mc.prequantized ? " prequantized" : "", (long long)E, (long long)T, (long long)K, (long long)mc.N);
  bool any_valid = false;
  for (int32_t v : mc.counts) any_valid = any_valid || v > 0;
  if (any_valid) EXPECT_TRUE(matches_oracle(got, ref, tolerance(c)));
  // Rows past the count are zero (exactly), as the oracle's.
  for (int64_t e = 0; e < E; ++e)
    for (int64_t t = std::max<int32_t>(std::min<int32_t>(mc.counts[e], T), 0); t < T; ++t)
      for (int64_t k = 0; k < K; ++k)
        ASSERT_EQ(got.data<uint16_t>()[(e * T + t) * K + k], 0u) << "e=" << e << " t=" << t << " k=" << k;
}

TEST(MaskedGpu, CountsZeroFullRagged) {
  FMOE_REQUIRE_GPU();
  const std::vector<MaskedGpuCase> cases = {
      {Format::BF16, false, 8, 16, 256, 128, {0, 0, 0, 0, 0, 0, 0, 0}, "zero"},
      {Format::BF16, false, 8, 16, 256, 128, {16, 16, 16, 16, 16, 16, 16, 16}, "full"},
      {Format::BF16, false, 8, 16, 256, 128, {3, 0, 16, 40, -1, 1, 7, 15}, "ragged"},
      {Format::FP8_BLOCK, false, 8, 16, 512, 256, {0, 0, 0, 0, 0, 0, 0, 0}, "zero"},
      {Format::FP8_BLOCK, false, 8, 16, 512, 256, {16, 16, 16, 16, 16, 16, 16, 16}, "full"},
      {Format::FP8_BLOCK, false, 8, 16, 512, 256, {3, 0, 16, 40, -1, 1, 7, 15}, "ragged"},
      {Format::FP8_BLOCK, true, 8, 16, 512, 256, {3, 0, 16, 40, -1, 1, 7, 15}, "ragged"},
      {Format::FP8_BLOCK, true, 8, 16, 512, 256, {16, 16, 16, 16, 16, 16, 16, 16}, "full"},
      // T > 64 rows per expert: the large (128x128) GEMM config and the multi-block plan.
      {Format::FP8_BLOCK, true, 8, 160, 512, 256, {160, 0, 100, 3, 160, 77, 129, 64}, "ragged-large"},
      {Format::BF16, false, 8, 160, 256, 128, {160, 0, 100, 3, 160, 77, 129, 64}, "ragged-large"},
      {Format::FP8_TENSOR, false, 4, 32, 256, 128, {5, 32, 0, 17}, "ragged"},
      {Format::FP8_CHANNEL, false, 4, 32, 256, 128, {5, 32, 0, 17}, "ragged"},
  };
  for (const auto& mc : cases) check_masked(mc);
}

TEST(MaskedGpu, RefusedShapesAndZeroT) {
  FMOE_REQUIRE_GPU();
  // fp8-block with K not a multiple of 128: the blockwise GEMM cannot run it.
  Case c;
  c.format = Format::FP8_BLOCK;
  c.K = 192;
  c.N = 128;
  c.E = 4;
  const LayerFile lf = make_layer(c);
  DeviceLayer dl(lf);
  Layer layer(lf.config, dl.weights);
  MaskedProblem p;
  p.num_experts = 4;
  p.max_tokens_per_expert = 8;
  p.hidden = 192;
  p.inter = 128;
  const Support s = layer.can_implement_masked(p);
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("multiples of 128"), std::string::npos) << s.reason;
  HostTensor x(DType::BF16, {4, 8, 192}), cnt(DType::I32, {4});
  DeviceTensor xd(x), cd(cnt), od(x);
  MaskedArgs m;
  m.hidden_states = xd.view;
  m.expert_num_tokens = cd.view;
  m.output = od.view;
  EXPECT_THROW(layer.run_masked(m), NotImplemented);
  EXPECT_THROW(layer.warmup(16, 2, nullptr), NotImplemented);

  // T = 0: nothing launched, no workspace.
  Case b;
  b.E = 4;
  const LayerFile lb = make_layer(b);
  DeviceLayer db(lb);
  Layer bl(lb.config, db.weights);
  EXPECT_EQ(bl.masked_workspace_size(0), 0u);
  HostTensor x0(DType::BF16, {4, 0, b.K});
  DeviceTensor x0d(x0), o0d(x0);
  m.hidden_states = x0d.view;
  m.output = o0d.view;
  m.hidden_states.data = m.output.data = nullptr;
  EXPECT_NO_THROW(bl.run_masked(m));
  // Host tensors are refused by the CUDA backend, naming them.
  MaskedArgs h = m;
  h.expert_num_tokens = cnt.view();
  try {
    bl.run_masked(h);
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.argument(), "expert_num_tokens");
  }
}

// ---------------------------------------------------------------- C: warm-up

// The first and second run of a layer, with or without warm-up first (printed; run each test
// alone in a fresh process to see the cold-start cost: CUDA loads kernel modules lazily).
void time_first_runs(bool warm) {
  for (Format f : {Format::BF16, Format::FP8_BLOCK}) {
    Case c;
    c.format = f;
    c.M = 200;
    c.K = 512;
    c.N = 256;
    c.E = 16;
    c.topk = 4;
    SCOPED_TRACE(describe(c));
    const LayerFile lf = make_layer(c);
    DeviceLayer dl(lf);
    Layer layer(lf.config, dl.weights);
    cudaStream_t s;
    FMOE_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const auto t0 = std::chrono::steady_clock::now();
    if (warm) layer.warmup(c.M, c.topk, s);
    const auto t1 = std::chrono::steady_clock::now();
    const Inputs in = make_inputs(c, c.E);
    DeviceRun run(layer, in);
    run.args.stream = s;
    run.poison(s);
    const auto t2 = std::chrono::steady_clock::now();
    layer.run(run.args);
    FMOE_CUDA(cudaStreamSynchronize(s));
    const auto t3 = std::chrono::steady_clock::now();
    layer.run(run.args);
    FMOE_CUDA(cudaStreamSynchronize(s));
    const auto t4 = std::chrono::steady_clock::now();
    auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    std::printf("[ warmup   ] %s: %s %.2f ms, first run %.3f ms, second run %.3f ms\n", format_name(f),
                warm ? "warmup" : "no warmup", ms(t0, t1), ms(t2, t3), ms(t3, t4));
    const HostTensor got = run.result(in);
    EXPECT_TRUE(matches_oracle(got, run_oracle(lf, in), tolerance(c)));
    FMOE_CUDA(cudaStreamDestroy(s));
    EXPECT_NO_THROW(layer.warmup(1, 1, nullptr));
    EXPECT_NO_THROW(layer.warmup(0, 8, nullptr));
  }
}

TEST(WarmupGpu, PreparesAndLeavesResultsUnchanged) {
  FMOE_REQUIRE_GPU();
  time_first_runs(true);
}

TEST(WarmupGpu, ColdFirstRunWithoutWarmup) {
  FMOE_REQUIRE_GPU();
  time_first_runs(false);
}

}  // namespace
}  // namespace fusedmoe::gputest
