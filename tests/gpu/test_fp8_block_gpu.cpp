// The fp8-block format (DeepSeek-V3: 128x128 weight blocks, 1x128 per-token activation groups) on
// the CUDA backend: the fused quantisers against the CPU codec bit for bit, the whole layer
// against the float64 oracle for every activation / option / ue8m0 (with graph capture and
// bitwise replay), edge cases, determinism, and the shapes the blockwise GEMM refuses.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <climits>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/moe_kernels.hpp"
#include "fusedmoe/codecs.hpp"
#include "fusedmoe/quantize.hpp"
#include "gpu/device_plan.hpp"
#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

Case block_case(uint64_t seed) {
  Case c;
  c.format = Format::FP8_BLOCK;
  c.hidden_dtype = DType::BF16;
  c.seed = seed;
  return c;
}

// check_against_oracle with LayerConfig::fp8_block_ue8m0 set as asked (CPU and GPU read it).
void check_block(const Case& c, bool ue8m0, int64_t num_ids = -1) {
  LayerFile lf = make_layer(c);
  lf.config.fp8_block_ue8m0 = ue8m0;
  SCOPED_TRACE(ue8m0 ? "ue8m0" : "fp32 scales");
  check_against_oracle(c, lf, make_inputs(c, num_ids < 0 ? c.E : num_ids));
}

// ---------------------------------------------------------------- quantisers, bit for bit

// Expected codes and scales of one row, and the comparison with the device's.
void expect_row_quant(const std::vector<float>& vals, bool ue8m0, const uint8_t* codes, const std::vector<float>& scales,
                      const std::vector<int32_t>& offsets, int32_t e, int64_t r, const char* what) {
  const int64_t cols = static_cast<int64_t>(vals.size()), G = (cols + 127) / 128;
  std::vector<uint8_t> q(cols);
  std::vector<float> s(G);
  quantize_fp8_per_token_group(vals.data(), 1, cols, 128, ue8m0, q.data(), s.data());
  const int64_t row0 = offsets[e], rows_e = offsets[e + 1] - row0;
  for (int64_t g = 0; g < G; ++g) {
    const float got = scales[row0 * G + g * rows_e + (r - row0)];
    ASSERT_EQ(std::memcmp(&got, &s[g], 4), 0) << what << " scale row " << r << " group " << g << ": " << got << " vs " << s[g];
  }
  for (int64_t c = 0; c < cols; ++c)
    ASSERT_EQ(codes[c], q[c]) << what << " code row " << r << " col " << c << " value " << vals[c];
}

class QuantGpu : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

// The GEMM1 operand (gather) and the GEMM2 operand (activation) quantisers against
// quantize_fp8_per_token_group on the same values: codes and scales bitwise, in the GEMM's layout.
TEST_P(QuantGpu, MatchesCpuCodecBitwise) {
  FMOE_REQUIRE_GPU();
  const auto [ue8m0, on_input] = GetParam();
  const int64_t M = 45, topk = 3, K = 320, N = 200;  // ragged last groups (64 and 72 columns)
  const int E = 5;
  std::mt19937 rng(7 + ue8m0 + 2 * on_input);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> x(M * K);
  for (int64_t i = 0; i < M * K; ++i) {
    // Mixed magnitudes per group so the scales differ, some exact zeros / tiny groups.
    const float mag = std::ldexp(1.0f, static_cast<int>(rng() % 24) - 12);
    x[i] = float_to_bf16_bits(((i / 128) % 7 == 3) ? 0.0f : nd(rng) * mag);
  }
  std::vector<int32_t> ids(M * topk);
  std::vector<float> w(M * topk);
  for (auto& v : ids) v = static_cast<int32_t>(rng() % (E - 1));  // expert E-1 empty
  for (auto& v : w) v = 0.1f + static_cast<float>(rng() % 1000) / 1000.0f;

  DeviceBuffer x_d(x.size() * 2), w_d(w.size() * 4);
  x_d.upload(x.data(), x.size() * 2);
  w_d.upload(w.data(), w.size() * 4);
  DevicePlan plan(ids, E);
  const int64_t slots = M * topk;
  DeviceBuffer a1(slots * K), s1(slots * ((K + 127) / 128) * 4);

  cuda::GatherParams gp = plan.gather_params(x_d.get(), DType::BF16, K, topk, static_cast<const float*>(w_d.get()),
                                              on_input, a1.get(), cuda::Operand::FP8, cuda::Fp8Quant::BLOCK);
  gp.block = {static_cast<float*>(s1.get()), plan.p.row_expert, plan.p.expert_offsets, ue8m0};
  cuda::launch_gather(gp, slots, nullptr);

  // GEMM2 operand: relu2 of random h, rounded to bf16, then quantised.
  std::vector<float> h(slots * N);
  for (auto& v : h) v = nd(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 8) - 4);
  DeviceBuffer h_d(h.size() * 4), a2(slots * N), s2(slots * ((N + 127) / 128) * 4);
  h_d.upload(h.data(), h.size() * 4);
  cuda::ActivationParams ap;
  ap.h = static_cast<const float*>(h_d.get());
  ap.R = N;
  ap.N = N;
  ap.row_expert = plan.p.row_expert;
  ap.rows = plan.p.expert_offsets + E;
  ap.act = Activation::RELU2;
  ap.act_dtype = DType::BF16;
  ap.out = a2.get();
  ap.op = cuda::Operand::FP8;
  ap.quant = cuda::Fp8Quant::BLOCK;
  ap.block = {static_cast<float*>(s2.get()), plan.p.row_expert, plan.p.expert_offsets, ue8m0};
  cuda::launch_activation(ap, slots, nullptr);
  FMOE_CUDA(cudaDeviceSynchronize());

  const auto offsets = download<int32_t>(plan.offsets, E + 1);
  const auto row_slot = download<int32_t>(plan.row_slot, slots);
  const auto row_expert = download<int32_t>(plan.row_expert, slots);
  const auto q1 = download<uint8_t>(a1, slots * K);
  const auto sc1 = download<float>(s1, slots * ((K + 127) / 128));
  const auto q2 = download<uint8_t>(a2, slots * N);
  const auto sc2 = download<float>(s2, slots * ((N + 127) / 128));
  ASSERT_EQ(offsets[E], slots);
  for (int64_t r = 0; r < slots; ++r) {
    const int64_t i = row_slot[r], t = i / topk;
    std::vector<float> v1(K);
    for (int64_t k = 0; k < K; ++k) {
      const float xv = bf16_bits_to_float(x[t * K + k]);
      v1[k] = on_input ? round_bf16(xv * w[i]) : xv;
    }
    expect_row_quant(v1, ue8m0, &q1[r * K], sc1, offsets, row_expert[r], r, "gather");
    std::vector<float> v2(N);
    for (int64_t n = 0; n < N; ++n) {
      const float c = h[r * N + n] > 0.0f ? h[r * N + n] : 0.0f;
      v2[n] = round_bf16(c * c);
    }
    expect_row_quant(v2, ue8m0, &q2[r * N], sc2, offsets, row_expert[r], r, "activation");
  }
}

INSTANTIATE_TEST_SUITE_P(Options, QuantGpu, ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<bool, bool>>& info) {
                           return std::string(std::get<0>(info.param) ? "ue8m0" : "fp32scale") +
                                  (std::get<1>(info.param) ? "_oninput" : "");
                         });

// ---------------------------------------------------------------- whole layer vs the oracle

struct ActCase {
  Activation act;
  bool interleaved;
  const char* name;
};
const ActCase kActs[] = {
    {Activation::SILU, false, "silu"},           {Activation::GELU, false, "gelu"},
    {Activation::GELU_TANH, false, "gelu_tanh"}, {Activation::RELU2, false, "relu2"},
    {Activation::SWIGLUOAI, false, "swigluoai"}, {Activation::SWIGLUOAI, true, "swigluoai_interleaved"},
};

class Fp8BlockGpu : public ::testing::TestWithParam<std::tuple<int, int, bool>> {};

TEST_P(Fp8BlockGpu, MatchesOracle) {
  FMOE_REQUIRE_GPU();
  const auto [ai, variant, ue8m0] = GetParam();
  Case c = block_case(9000u + 10u * ai + variant + (ue8m0 ? 100u : 0u));
  c.act = kActs[ai].act;
  c.interleaved = kActs[ai].interleaved;
  // Variant 0: vLLM conventions. Variant 1: FlashInfer order, biases, weight on input, top-3.
  c.order = variant == 0 ? GateUpOrder::GATE_UP : GateUpOrder::UP_GATE;
  c.bias = variant == 1;
  c.on_input = variant == 1;
  c.topk = variant == 0 ? 2 : 3;
  c.w_gain = c.act == Activation::SWIGLUOAI ? 6.0f : 1.0f;
  check_block(c, ue8m0);
}

INSTANTIATE_TEST_SUITE_P(Activations, Fp8BlockGpu,
                         ::testing::Combine(::testing::Range(0, 6), ::testing::Range(0, 2), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<int, int, bool>>& info) {
                           const int ai = std::get<0>(info.param);
                           return std::string(kActs[ai].name) +
                                  (std::get<1>(info.param) == 0 ? "_vllm" : "_flashinfer_bias_oninput") +
                                  (std::get<2>(info.param) ? "_ue8m0" : "");
                         });

// The 128x128 (large-M) config: several M and N tiles per expert, partial last M tiles, several
// K blocks; and the swap-AB config with several K blocks and 8 experts per token.
TEST(Fp8BlockGpuShapes, LargeConfig) {
  FMOE_REQUIRE_GPU();
  for (bool ue8m0 : {false, true}) {
    Case c = block_case(9500 + ue8m0);
    c.M = 700;
    c.K = 512;
    c.N = 384;
    c.E = 6;
    c.topk = 2;
    check_block(c, ue8m0);
  }
}

TEST(Fp8BlockGpuShapes, ManyKBlocksTopk8) {
  FMOE_REQUIRE_GPU();
  Case c = block_case(9510);
  c.M = 24;
  c.K = 1024;
  c.N = 256;
  c.E = 16;
  c.topk = 8;
  c.hidden_dtype = DType::F32;
  check_block(c, false);
}

TEST(Fp8BlockGpuShapes, HiddenDtypes) {
  FMOE_REQUIRE_GPU();
  for (DType dt : {DType::F32, DType::F16}) {
    Case c = block_case(9520 + static_cast<int>(dt));
    c.hidden_dtype = dt;
    check_block(c, true);
  }
}

// ---------------------------------------------------------------- edge cases

TEST(Fp8BlockEdgeGpu, ZeroTokensWritesAndLaunchesNothing) {
  FMOE_REQUIRE_GPU();
  Case c = block_case(9600);
  c.M = 0;
  const LayerFile lf = make_layer(c);
  DeviceLayer dl(lf);
  Layer layer(lf.config, dl.weights);
  EXPECT_EQ(layer.workspace_size(0, c.topk), 0u);
  const Inputs in = make_inputs(c, c.E);
  DeviceRun run(layer, in);
  EXPECT_NO_THROW(layer.run(run.args));
  FMOE_CUDA(cudaDeviceSynchronize());
}

TEST(Fp8BlockEdgeGpu, OneToken) {
  FMOE_REQUIRE_GPU();
  for (int64_t topk : {1, 4}) {
    Case c = block_case(9610 + topk);
    c.M = 1;
    c.topk = topk;
    c.on_input = topk == 1;
    check_block(c, topk == 4);
  }
}

// Decode sizes on the small-M path (block scales inside the weight-streaming kernels): M = 1 and
// 2 take GEMM2 + finalize fused ((M - 1) * topk * 8 <= E), M = 3 the small-M GEMMs and finalize
// apart (12 rows <= 16); K = 512 and N = 256 keep both GEMMs' rows >= 256 bytes.
TEST(Fp8BlockEdgeGpu, DecodeSizesOnTheSmallMPath) {
  FMOE_REQUIRE_GPU();
  for (int64_t M : {1, 2, 3})
    for (int variant = 0; variant < 2; ++variant) {
      Case c = block_case(9660 + 10 * M + variant);
      c.M = M;
      c.K = 512;
      c.N = 256;
      c.E = 32;
      c.topk = 4;
      if (variant == 1) {
        c.act = Activation::SWIGLUOAI;
        c.interleaved = true;
        c.bias = true;
        c.on_input = true;
        c.w_gain = 6.0f;
      }
      SCOPED_TRACE("M = " + std::to_string(M) + (variant ? " swigluoai interleaved, bias, on input" : " silu"));
      check_block(c, variant == 1);
    }
}

TEST(Fp8BlockEdgeGpu, ExpertsWithoutTokens) {
  FMOE_REQUIRE_GPU();
  Case c = block_case(9620);
  c.E = 16;
  check_block(c, false, /*num_ids=*/4);
}

TEST(Fp8BlockEdgeGpu, AllTokensOnOneExpert) {
  FMOE_REQUIRE_GPU();
  for (int64_t M : {300, 1100}) {  // swap-AB config (5 partial N tiles) / 128x128 config
    Case c = block_case(9630 + M);
    c.M = M;
    c.topk = 1;
    const LayerFile lf = make_layer(c);
    Inputs in = make_inputs(c, c.E);
    for (int64_t i = 0; i < c.M; ++i) in.ids.data<int32_t>()[i] = 5;
    check_against_oracle(c, lf, in);
  }
}

TEST(Fp8BlockEdgeGpu, IdsOutOfRangeContributeNothing) {
  FMOE_REQUIRE_GPU();
  Case c = block_case(9640);
  c.topk = 4;
  c.bias = true;
  const LayerFile lf = make_layer(c);
  Inputs in = make_inputs(c, c.E);
  int32_t* ids = in.ids.data<int32_t>();
  const int32_t bad[] = {-1, static_cast<int32_t>(c.E), 1000, INT_MIN, INT_MAX};
  std::mt19937 rng(5);
  for (int64_t i = 0; i < c.M * c.topk; ++i)
    if (rng() % 3 == 0) ids[i] = bad[rng() % 5];
  for (int64_t k = 0; k < c.topk; ++k) ids[3 * c.topk + k] = -1;
  check_against_oracle(c, lf, in);
}

TEST(Fp8BlockEdgeGpu, ExpertMapWithUnmappedExperts) {
  FMOE_REQUIRE_GPU();
  for (bool on_input : {false, true}) {
    Case c = block_case(9650 + on_input);
    c.E = 8;
    c.topk = 3;
    c.on_input = on_input;
    const int64_t E_global = 16;
    const LayerFile lf = make_layer(c);
    Inputs in = make_inputs(c, E_global);
    in.has_map = true;
    in.expert_map = HostTensor(DType::I32, {E_global});
    for (int64_t g = 0; g < E_global; ++g)
      in.expert_map.data<int32_t>()[g] = g % 2 == 0 ? static_cast<int32_t>(c.E - 1 - g / 2) : -1;
    in.ids.data<int32_t>()[0] = static_cast<int32_t>(E_global);
    in.ids.data<int32_t>()[1] = -7;
    check_against_oracle(c, lf, in);
  }
}

TEST(Fp8BlockEdgeGpu, MultiBlockPlan) {
  FMOE_REQUIRE_GPU();
  Case c = block_case(9660);
  c.M = 1500;
  c.topk = 3;
  c.E = 40;
  c.K = 128;
  c.N = 128;
  const LayerFile lf = make_layer(c);
  Inputs in = make_inputs(c, c.E + 3);
  check_against_oracle(c, lf, in);
}

TEST(Fp8BlockEdgeGpu, TwoRunsBitwiseIdentical) {
  FMOE_REQUIRE_GPU();
  Case c = block_case(9670);
  c.M = 2000;
  c.E = 32;
  c.topk = 4;
  c.K = 256;
  c.N = 128;
  const LayerFile lf = make_layer(c);
  const Inputs in = make_inputs(c, c.E);
  DeviceLayer dl(lf);
  Layer layer(lf.config, dl.weights);
  const HostTensor a = run_gpu(layer, in);
  const HostTensor b = run_gpu(layer, in);
  EXPECT_TRUE(test::bitwise_equal(a, b));
  const std::vector<double> av = test::to_double(a);
  for (double v : av) ASSERT_TRUE(std::isfinite(v));
}

TEST(Fp8BlockEdgeGpu, RunTimedMatchesRun) {
  FMOE_REQUIRE_GPU();
  Case c = block_case(9680);
  c.M = 64;
  const LayerFile lf = make_layer(c);
  const Inputs in = make_inputs(c, c.E);
  DeviceLayer dl(lf);
  Layer layer(lf.config, dl.weights);
  const HostTensor plain = run_gpu(layer, in);
  DeviceRun run(layer, in);
  run.poison();
  const StageTimes t = layer.run_timed(run.args);
  EXPECT_GT(t.gemm1_ms, 0.0);
  EXPECT_GT(t.gemm2_ms, 0.0);
  EXPECT_TRUE(test::bitwise_equal(plain, run.result(in)));
}

// Sizes that are not multiples of 128: the blockwise GEMM cannot run them; refused with the
// reason (the CPU backend runs them).
TEST(Fp8BlockEdgeGpu, UnalignedSizesRefusedWithAReason) {
  FMOE_REQUIRE_GPU();
  for (auto [K, N] : {std::pair<int64_t, int64_t>{256, 64}, {192, 128}}) {
    Case c = block_case(9690);
    c.K = K;
    c.N = N;
    expect_refused(c, {"multiples of 128", "FUSEDMOE_SKIP_GPU_FORMATS"});
  }
}

}  // namespace
}  // namespace fusedmoe::gputest
