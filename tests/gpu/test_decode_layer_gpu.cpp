// The one-token layer kernels (decode_layer.cu, decode_layer_w4.cu) through Layer::run() against
// the float64 oracle: every case is one token on shapes a kernel takes (decode_layer_applies:
// fp8-tensor, fp8-block or fp8-channel; decode_layer_w4_applies: MXFP4 / NVFP4 with bf16
// activations, MXFP4 with fp8 activations, W4A8, NVFP4 W4A4; gated activations, top-k <= 8), so
// run() launches it and nothing else - checked on a captured run (one kernel node). Each case also
// replays a captured CUDA graph (a cooperative launch inside a graph) and must write the same
// bytes as the first run. 16-bit layers keep the chain.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <climits>
#include <random>
#include <string>
#include <vector>

#include "cuda/decode_layer.hpp"
#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

struct DecodeCase {
  const char* name;
  Format format;
  Activation act;
  bool interleaved;
  GateUpOrder order;
  bool bias;
  DType hidden;
  int64_t K, N, E, topk;
  bool ue8m0 = false;  // fp8-block: power-of-two scales
  bool swizzled = false;  // mxfp4 / nvfp4: 128x4-swizzled weight scales
  ActDtype act_dtype = ActDtype::BF16;  // mxfp4: fp8 activations
  bool uint4b8 = false;                 // w4a8: stored q + 8
};

Case to_case(const DecodeCase& d, uint64_t seed) {
  Case c;
  c.format = d.format;
  c.fp8_static = d.format == Format::FP8_TENSOR;  // (fp8-block has no static scale)
  c.act = d.act;
  c.interleaved = d.interleaved;
  c.order = d.order;
  c.bias = d.bias;
  c.hidden_dtype = d.hidden;
  c.M = 1;
  c.K = d.K;
  c.N = d.N;
  c.E = d.E;
  c.topk = d.topk;
  c.seed = seed;
  c.w_gain = d.act == Activation::SWIGLUOAI ? 6.0f : 1.0f;
  c.swizzled = d.swizzled;
  c.act_dtype = d.act_dtype;
  c.uint4b8 = d.uint4b8;
  return c;
}

// The shape fits the kernel's shared memory on this GPU (the rest of decode_layer_applies is
// the format / activation / top-k of the case).
void expect_shape_fits(const Case& c) {
  const int sms = device_sm_count();
  if (c.format == Format::MXFP4 || c.format == Format::NVFP4 || c.format == Format::W4A8_INT4) {
    cuda::DecodeLayerParams p;
    p.gather.K = c.K;
    p.act.N = c.N;
    p.gather.topk = c.topk;
    p.sm_count = sms;
    p.w4_2.format = c.format;
    if (c.format == Format::W4A8_INT4 || c.act_dtype == ActDtype::FP8) p.gather.quant = cuda::Fp8Quant::ROW;
    if (c.act_dtype == ActDtype::NVFP4) p.gather.quant = cuda::Fp8Quant::NVFP4;
    EXPECT_LE(cuda::decode_layer_w4_cols(c.K, sms), 32);
    EXPECT_LE(cuda::decode_layer_w4_smem_bytes(p), 203 * 1024) << describe(c);
    return;
  }
  EXPECT_LE(cuda::decode_layer_cols(c.K, sms), 128);
  EXPECT_LE(cuda::decode_layer_smem_bytes(c.K, c.N, c.topk, sms, c.format == Format::FP8_CHANNEL), 203 * 1024)
      << describe(c);
}

// run() launches one kernel and nothing else: a captured run is a graph of one kernel node (the
// chain it replaces is three or more).
size_t captured_nodes(const LayerFile& lf, const Inputs& in, cudaGraphNodeType* first_type) {
  DeviceLayer dl(lf);
  Layer layer(lf.config, dl.weights);
  DeviceRun run(layer, in);
  cudaStream_t stream;
  FMOE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  run.args.stream = stream;
  cudaGraph_t graph;
  FMOE_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  layer.run(run.args);
  FMOE_CUDA(cudaStreamEndCapture(stream, &graph));
  size_t nodes = 0;
  FMOE_CUDA(cudaGraphGetNodes(graph, nullptr, &nodes));
  if (nodes >= 1) {
    std::vector<cudaGraphNode_t> all(nodes);
    FMOE_CUDA(cudaGraphGetNodes(graph, all.data(), &nodes));
    FMOE_CUDA(cudaGraphNodeGetType(all[0], first_type));
  }
  FMOE_CUDA(cudaGraphDestroy(graph));
  FMOE_CUDA(cudaStreamDestroy(stream));
  return nodes;
}

void expect_one_kernel(const Case& c, const LayerFile& lf, const Inputs& in) {
  cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
  EXPECT_EQ(captured_nodes(lf, in, &type), 1u) << describe(c);
  EXPECT_EQ(type, cudaGraphNodeTypeKernel) << describe(c);
}

const DecodeCase kCases[] = {
    // Qwen3-30B-A3B (K 2048, N 768) and DeepSeek-V3 TP8 (K 7168, N 256) at their top-8.
    {"qwen3_fp8_silu", Format::FP8_TENSOR, Activation::SILU, false, GateUpOrder::GATE_UP, false, DType::BF16, 2048, 768, 32, 8},
    {"tp8_fp8_silu", Format::FP8_TENSOR, Activation::SILU, false, GateUpOrder::GATE_UP, false, DType::BF16, 7168, 256, 32, 8},
    // Options: biases, up / gate order, interleaved swigluoai, gelu, fp32 / fp16 hidden states,
    // K not a multiple of a CTA's columns (the last CTAs have a partial block or none), short N.
    {"fp8_swigluoai_interleaved_bias", Format::FP8_TENSOR, Activation::SWIGLUOAI, true, GateUpOrder::GATE_UP, true, DType::BF16, 1040, 208, 16, 6},
    {"fp8_gelu_upgate_bias_f16_hidden", Format::FP8_TENSOR, Activation::GELU, false, GateUpOrder::UP_GATE, true, DType::F16, 1040, 208, 16, 4},
    {"fp8_gelu_tanh_f32_hidden", Format::FP8_TENSOR, Activation::GELU_TANH, false, GateUpOrder::GATE_UP, false, DType::F32, 4096, 144, 12, 3},
    {"fp8_silu_top1", Format::FP8_TENSOR, Activation::SILU, false, GateUpOrder::UP_GATE, true, DType::BF16, 512, 64, 8, 1},
    // fp8-block (1 x 128 activation groups, 128 x 128 weight blocks): the two presets' shapes,
    // ue8m0 scales, options, and one 128-wide group per GEMM2 k row.
    {"block_qwen3_silu", Format::FP8_BLOCK, Activation::SILU, false, GateUpOrder::GATE_UP, false, DType::BF16, 2048, 768, 32, 8},
    {"block_tp8_silu_ue8m0", Format::FP8_BLOCK, Activation::SILU, false, GateUpOrder::GATE_UP, false, DType::BF16, 7168, 256, 32, 8, true},
    {"block_swigluoai_interleaved_bias", Format::FP8_BLOCK, Activation::SWIGLUOAI, true, GateUpOrder::GATE_UP, true, DType::BF16, 1024, 384, 16, 6},
    {"block_gelu_upgate_bias_f32_hidden_ue8m0", Format::FP8_BLOCK, Activation::GELU, false, GateUpOrder::UP_GATE, true, DType::F32, 1280, 128, 12, 3, true},
    // fp8-channel (per-token dynamic activation scales, per-channel weight scales).
    {"channel_qwen3_silu", Format::FP8_CHANNEL, Activation::SILU, false, GateUpOrder::GATE_UP, false, DType::BF16, 2048, 768, 32, 8},
    {"channel_tp8_silu", Format::FP8_CHANNEL, Activation::SILU, false, GateUpOrder::GATE_UP, false, DType::BF16, 7168, 256, 32, 8},
    {"channel_swigluoai_interleaved_bias_f16_hidden", Format::FP8_CHANNEL, Activation::SWIGLUOAI, true, GateUpOrder::UP_GATE, true, DType::F16, 1040, 208, 16, 5},
};
// fp8-tensor with dynamic activation scales (Case::fp8_static false): the same kernel, both amaxes
// inside it.
const DecodeCase kDynamicCases[] = {
    {"dynamic_qwen3_silu", Format::FP8_TENSOR, Activation::SILU, false, GateUpOrder::GATE_UP, false, DType::BF16, 2048, 768, 32, 8},
    {"dynamic_tp8_silu", Format::FP8_TENSOR, Activation::SILU, false, GateUpOrder::GATE_UP, false, DType::BF16, 7168, 256, 32, 8},
    {"dynamic_gelu_tanh_bias_f32_hidden", Format::FP8_TENSOR, Activation::GELU_TANH, false, GateUpOrder::UP_GATE, true, DType::F32, 1040, 208, 16, 3},
};

// 4-bit weights (decode_layer_w4.cu): MXFP4 / NVFP4 with bf16 activations, Qwen3-30B-A3B and
// gpt-oss-120b shapes (K = N = 2880: a partial 128-wide k-block in both GEMMs, the W2 slices of
// 24 columns), swizzled scales (gathered by the CTAs, not copied), options, and short shapes
// whose W2 scale slices are not 16-byte runs (gathered too).
const DecodeCase kW4Cases[] = {
    {"qwen3_mxfp4_silu", Format::MXFP4, Activation::SILU, false, GateUpOrder::GATE_UP, false, DType::BF16, 2048, 768, 32, 8},
    {"qwen3_nvfp4_silu", Format::NVFP4, Activation::SILU, false, GateUpOrder::GATE_UP, false, DType::BF16, 2048, 768, 32, 8},
    {"qwen3_mxfp4_silu_swizzled", Format::MXFP4, Activation::SILU, false, GateUpOrder::GATE_UP, false, DType::BF16, 2048, 768, 16, 8, false, true},
    {"gptoss_mxfp4_swigluoai_interleaved_bias", Format::MXFP4, Activation::SWIGLUOAI, true, GateUpOrder::GATE_UP, true, DType::BF16, 2880, 2880, 6, 4},
    {"gptoss_nvfp4_swigluoai_bias_swizzled", Format::NVFP4, Activation::SWIGLUOAI, false, GateUpOrder::GATE_UP, true, DType::BF16, 2880, 2880, 6, 4, false, true},
    {"mxfp4_gelu_upgate_bias_f16_hidden", Format::MXFP4, Activation::GELU, false, GateUpOrder::UP_GATE, true, DType::F16, 1056, 224, 16, 5},
    {"nvfp4_gelu_tanh_f32_hidden", Format::NVFP4, Activation::GELU_TANH, false, GateUpOrder::GATE_UP, false, DType::F32, 4096, 160, 12, 3},
    {"nvfp4_silu_top1_bias_swizzled", Format::NVFP4, Activation::SILU, false, GateUpOrder::UP_GATE, true, DType::BF16, 512, 64, 8, 1, false, true},
    // Per-token fp8 activations (mxfp4-fp8) and W4A8 (int4, group-128 scales): x and the
    // activation quantised per row inside the kernel.
    {"qwen3_mxfp4_fp8_silu", Format::MXFP4, Activation::SILU, false, GateUpOrder::GATE_UP, false, DType::BF16, 2048, 768, 32, 8, false, false, ActDtype::FP8},
    // (gpt-oss-120b's K = N = 2880 with fp8 activations keeps the chain: OtherCallsKeepTheChain.)
    {"mxfp4_fp8_swigluoai_interleaved_bias", Format::MXFP4, Activation::SWIGLUOAI, true, GateUpOrder::GATE_UP, true, DType::BF16, 1536, 1024, 6, 4, false, false, ActDtype::FP8},
    {"mxfp4_fp8_gelu_upgate_bias_f32_hidden_swizzled", Format::MXFP4, Activation::GELU, false, GateUpOrder::UP_GATE, true, DType::F32, 1056, 224, 16, 5, false, true, ActDtype::FP8},
    {"qwen3_w4a8_silu", Format::W4A8_INT4, Activation::SILU, false, GateUpOrder::GATE_UP, false, DType::BF16, 2048, 768, 32, 8},
    {"w4a8_uint4b8_gelu_tanh_bias_f16_hidden", Format::W4A8_INT4, Activation::GELU_TANH, false, GateUpOrder::UP_GATE, true, DType::F16, 1024, 384, 12, 3, false, false, ActDtype::BF16, true},
    {"w4a8_swigluoai_interleaved_top1", Format::W4A8_INT4, Activation::SWIGLUOAI, true, GateUpOrder::GATE_UP, true, DType::BF16, 4096, 256, 8, 1},
    // NVFP4 activations (W4A4): x quantised per slot with its expert's input scale, the activation
    // by 16-wide blocks after the barrier.
    {"qwen3_nvfp4_w4a4_silu", Format::NVFP4, Activation::SILU, false, GateUpOrder::GATE_UP, false, DType::BF16, 2048, 768, 32, 8, false, false, ActDtype::NVFP4},
    {"nvfp4_w4a4_swigluoai_interleaved_bias_f32_hidden_swizzled", Format::NVFP4, Activation::SWIGLUOAI, true, GateUpOrder::UP_GATE, true, DType::F32, 1056, 224, 16, 5, false, true, ActDtype::NVFP4},
};

class DecodeLayerGpu : public ::testing::TestWithParam<int> {};

TEST_P(DecodeLayerGpu, MatchesOracle) {
  FMOE_REQUIRE_GPU();
  const DecodeCase& d = kCases[GetParam()];
  const Case c = to_case(d, 900 + static_cast<uint64_t>(GetParam()));
  expect_shape_fits(c);
  LayerFile lf = make_layer(c);
  lf.config.fp8_block_ue8m0 = d.ue8m0;  // read by the CPU oracle and the GPU
  const Inputs in = make_inputs(c, c.E);
  check_against_oracle(c, lf, in);
  expect_one_kernel(c, lf, in);
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeLayerGpu, ::testing::Range(0, static_cast<int>(std::size(kCases))),
                         [](const ::testing::TestParamInfo<int>& i) { return std::string(kCases[i.param].name); });

class DecodeLayerW4Gpu : public ::testing::TestWithParam<int> {};

TEST_P(DecodeLayerW4Gpu, MatchesOracle) {
  FMOE_REQUIRE_GPU();
  const Case c = to_case(kW4Cases[GetParam()], 970 + static_cast<uint64_t>(GetParam()));
  expect_shape_fits(c);
  const LayerFile lf = make_layer(c);
  const Inputs in = make_inputs(c, c.E);
  check_against_oracle(c, lf, in);
  expect_one_kernel(c, lf, in);
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeLayerW4Gpu, ::testing::Range(0, static_cast<int>(std::size(kW4Cases))),
                         [](const ::testing::TestParamInfo<int>& i) { return std::string(kW4Cases[i.param].name); });

class DecodeLayerDynamicGpu : public ::testing::TestWithParam<int> {};

TEST_P(DecodeLayerDynamicGpu, MatchesOracle) {
  FMOE_REQUIRE_GPU();
  Case c = to_case(kDynamicCases[GetParam()], 940 + static_cast<uint64_t>(GetParam()));
  c.fp8_static = false;
  expect_shape_fits(c);
  const LayerFile lf = make_layer(c);
  const Inputs in = make_inputs(c, c.E);
  check_against_oracle(c, lf, in);
  expect_one_kernel(c, lf, in);
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeLayerDynamicGpu, ::testing::Range(0, static_cast<int>(std::size(kDynamicCases))),
                         [](const ::testing::TestParamInfo<int>& i) { return std::string(kDynamicCases[i.param].name); });

// Slots that select nothing (ids out of range, experts the map leaves to another rank) are
// skipped in both halves of the kernel; a token with no slot at all gets zeros.
TEST(DecodeLayerGpuEdge, InvalidIdsAndExpertMap) {
  FMOE_REQUIRE_GPU();
  for (Format f : {Format::FP8_TENSOR, Format::FP8_BLOCK, Format::FP8_CHANNEL, Format::MXFP4, Format::NVFP4,
                   Format::W4A8_INT4}) {
    Case c = to_case(kCases[0], 950 + static_cast<uint64_t>(f));
    c.format = f;
    c.fp8_static = f == Format::FP8_TENSOR;
    c.E = 16;
    c.bias = true;
    const int64_t E_global = 32;
    const LayerFile lf = make_layer(c);
    Inputs in = make_inputs(c, E_global);
    in.has_map = true;
    in.expert_map = HostTensor(DType::I32, {E_global});
    for (int64_t g = 0; g < E_global; ++g)
      in.expert_map.data<int32_t>()[g] = g % 2 == 0 ? static_cast<int32_t>(c.E - 1 - g / 2) : -1;
    int32_t* ids = in.ids.data<int32_t>();
    ids[0] = static_cast<int32_t>(E_global);  // past the map
    ids[3] = -1;
    ids[5] = INT_MIN;
    check_against_oracle(c, lf, in);
    expect_one_kernel(c, lf, in);

    Inputs none = in;  // no slot selects anything: out = 0
    for (int64_t k = 0; k < c.topk; ++k) none.ids.data<int32_t>()[k] = k % 2 == 0 ? -1 : static_cast<int32_t>(E_global + k);
    DeviceLayer dl(lf);
    const Layer layer(lf.config, dl.weights);
    const HostTensor out = run_gpu(layer, none);
    for (double v : test::to_double(out)) ASSERT_EQ(v, 0.0);
  }
}

// Not taken (the chain runs; several graph nodes): 16-bit weights (measured slower), a
// non-gated activation (relu2), more than one token, the router weight on the input; a 4-bit
// layer with more than 32 output columns per CTA (K = 4480: 40 on 132 SMs); nvfp4-w4a4 whose
// shared memory exceeds 128 KB (gpt-oss-120b's K = N = 2880: measured slower than the chain).
TEST(DecodeLayerGpuEdge, OtherCallsKeepTheChain) {
  FMOE_REQUIRE_GPU();
  for (int v = 0; v < 7; ++v) {
    Case c = to_case(kCases[0], 960 + static_cast<uint64_t>(v));
    c.E = 16;
    if (v == 0) c.format = Format::BF16, c.fp8_static = false;
    if (v == 1) c.act = Activation::RELU2;
    if (v == 2) c.M = 2;
    if (v == 3) c.on_input = true;
    if (v == 4) {
      c.format = Format::NVFP4, c.act_dtype = ActDtype::NVFP4, c.fp8_static = false;
      c.K = 4480, c.N = 64, c.E = 4, c.topk = 4;
    }
    if (v == 5) {
      c.format = Format::NVFP4, c.act_dtype = ActDtype::NVFP4, c.fp8_static = false;
      c.K = c.N = 2880, c.E = 4, c.topk = 4;
    }
    if (v == 6) {  // gpt-oss-120b's shape with per-token fp8 activations: 176 KB of shared memory (over 128)
      c.format = Format::MXFP4, c.act_dtype = ActDtype::FP8, c.fp8_static = false;
      c.K = c.N = 2880, c.E = 4, c.topk = 4;
    }
    const LayerFile lf = make_layer(c);
    const Inputs in = make_inputs(c, c.E);
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    EXPECT_GT(captured_nodes(lf, in, &type), 1u) << describe(c);
  }
}

}  // namespace
}  // namespace fusedmoe::gputest
