// The CUDA backend against the float64 CPU oracle: every format x activation, each in two
// option sets (gate/up order, biases, router weight on input, top-k) so that every option
// meets every format. Each case also checks that a second run, captured in a CUDA graph and
// replayed, writes the same bytes as the first (determinism and graph capture).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

struct FormatCase {
  Format format;
  bool fp8_static;
  const char* name;
};
struct ActCase {
  Activation act;
  bool interleaved;
  const char* name;
};

const FormatCase kFormats[] = {
    {Format::BF16, false, "bf16"},
    {Format::FP16, false, "fp16"},
    {Format::FP32, false, "fp32"},
    {Format::FP8_TENSOR, true, "fp8_tensor_static"},
    {Format::FP8_TENSOR, false, "fp8_tensor_dynamic"},
    {Format::FP8_CHANNEL, false, "fp8_channel"},
};
const ActCase kActs[] = {
    {Activation::SILU, false, "silu"},
    {Activation::GELU, false, "gelu"},
    {Activation::GELU_TANH, false, "gelu_tanh"},
    {Activation::RELU2, false, "relu2"},
    {Activation::SWIGLUOAI, false, "swigluoai"},
    {Activation::SWIGLUOAI, true, "swigluoai_interleaved"},
};

DType natural_dtype(Format f) {
  if (f == Format::FP16) return DType::F16;
  if (f == Format::FP32) return DType::F32;
  return DType::BF16;
}

Case make_case(const FormatCase& f, const ActCase& a, int variant) {
  Case c;
  c.format = f.format;
  c.fp8_static = f.fp8_static;
  c.act = a.act;
  c.interleaved = a.interleaved;
  c.hidden_dtype = natural_dtype(f.format);
  // Variant 0: vLLM conventions. Variant 1: FlashInfer order, biases, weight on input, top-3.
  c.order = variant == 0 ? GateUpOrder::GATE_UP : GateUpOrder::UP_GATE;
  c.bias = variant == 1;
  c.on_input = variant == 1;
  c.topk = variant == 0 ? 2 : 3;
  c.seed = 1000u * static_cast<uint64_t>(f.format) + 10u * static_cast<uint64_t>(a.act) + variant +
           (a.interleaved ? 500u : 0u) + (f.fp8_static ? 7000u : 0u);
  // swigluoai: larger pre-activations so that the limit clamps some gates and ups.
  c.w_gain = a.act == Activation::SWIGLUOAI ? 6.0f : 1.0f;
  return c;
}

class LayerGpu : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(LayerGpu, MatchesOracle) {
  FMOE_REQUIRE_GPU();
  const auto [fi, ai, variant] = GetParam();
  check_case(make_case(kFormats[fi], kActs[ai], variant));
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<int, int, int>>& info) {
  const auto [fi, ai, variant] = info.param;
  return std::string(kFormats[fi].name) + "_" + kActs[ai].name + (variant == 0 ? "_vllm" : "_flashinfer_bias_oninput");
}

INSTANTIATE_TEST_SUITE_P(AllFormatsActivations, LayerGpu,
                         ::testing::Combine(::testing::Range(0, 6), ::testing::Range(0, 6), ::testing::Range(0, 2)),
                         case_name);

// Hidden dtypes other than the weights' (the activation dtype follows hidden_states).
class CrossDtypeGpu : public ::testing::TestWithParam<std::tuple<int, DType>> {};

TEST_P(CrossDtypeGpu, MatchesOracle) {
  FMOE_REQUIRE_GPU();
  const auto [fi, dt] = GetParam();
  Case c = make_case(kFormats[fi], kActs[0], 0);
  c.hidden_dtype = dt;
  c.seed += 99;
  check_case(c);
}

INSTANTIATE_TEST_SUITE_P(HiddenDtypes, CrossDtypeGpu,
                         ::testing::Combine(::testing::Values(0, 1, 2, 4, 5),
                                            ::testing::Values(DType::F32, DType::F16, DType::BF16)),
                         [](const ::testing::TestParamInfo<std::tuple<int, DType>>& info) {
                           return std::string(kFormats[std::get<0>(info.param)].name) + "_x" +
                                  dtype_name(std::get<1>(info.param));
                         });

// Larger problems, one shape per suite, every format: an oracle case with M tokens over E experts
// (top-2) and the given hidden / intermediate sizes.
void check_shape(int fi, int64_t M, int64_t K, int64_t N, int64_t E, uint64_t seed_add) {
  Case c = make_case(kFormats[fi], kActs[0], 0);
  c.M = M;
  c.K = K;
  c.N = N;
  c.E = E;
  c.topk = 2;
  c.seed += seed_add;
  check_case(c);
}

std::string format_case_name(const ::testing::TestParamInfo<int>& info) { return kFormats[info.param].name; }

// Several M and N tiles per expert in the TMA GEMMs, and the multi-block plan (more than 1024 slots).
class LargeGpu : public ::testing::TestWithParam<int> {};
TEST_P(LargeGpu, MatchesOracle) {
  FMOE_REQUIRE_GPU();
  check_shape(GetParam(), 700, 512, 384, 6, 5);
}
INSTANTIATE_TEST_SUITE_P(Formats, LargeGpu, ::testing::Range(0, 6), format_case_name);

// Long K (> 1024) with > 64 rows per expert: the cooperative large config (FP8FastAccum for
// fp8) and the K <= 1024 pingpong config of GEMM2 in one layer.
class LongKGpu : public ::testing::TestWithParam<int> {};
TEST_P(LongKGpu, MatchesOracle) {
  FMOE_REQUIRE_GPU();
  check_shape(GetParam(), 600, 2048, 256, 4, 11);
}
INSTANTIATE_TEST_SUITE_P(Formats, LongKGpu, ::testing::Range(0, 6), format_case_name);

// Long N (> 1024) with > 64 rows per expert: GEMM2 (k = N) on the cooperative large config, which
// for bf16 outputs of bf16 / fp8 operands writes y in bf16 (sm90_bf16_d_applies), as the pingpong
// config does in LargeGpu / LongKGpu.
class LongNGpu : public ::testing::TestWithParam<int> {};
TEST_P(LongNGpu, MatchesOracle) {
  FMOE_REQUIRE_GPU();
  check_shape(GetParam(), 600, 256, 1536, 4, 17);
}
INSTANTIATE_TEST_SUITE_P(Formats, LongNGpu, ::testing::Range(0, 6), format_case_name);

}  // namespace
}  // namespace fusedmoe::gputest
