// GEMM1 + the gated activation on the stream GEMM (stream_gemm1_activation) against the two
// kernels it replaces on the same inputs (stream_grouped_gemm writing h, then the activation
// kernel): the same bytes of GEMM2's operand. The fused kernel's weight blocks hold the gate and
// the up rows of 64 outputs in a 5-D TMA order, the unfused one 128 consecutive rows; both run the
// same wgmma steps per weight row, so every sum and every output must agree bit for bit. Cases:
// every gated activation, both gate / up orders, halves and interleaved rows, bias, tensor dequant
// with static fp8 quantisation, bf16 / fp16 conversion, N not a multiple of the 64-output block
// (104), k not a multiple of the 128-byte stage (784 fp8), an expert with more rows than one
// token batch (70 > 64), experts without rows (NaN weights), and a CUDA-graph replay. The output
// is poisoned before each run. Then the fp8-block variant (codes and group scales after the
// quantise-only pass), and what each refuses.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/grouped_gemm.hpp"
#include "cuda/moe_kernels.hpp"
#include "cuda/stream_gemm.hpp"
#include "fusedmoe/error.hpp"
#include "gpu/gated_act_problem.hpp"
#include "gpu/gpu_test_util.hpp"
#include "gpu/operand_util.hpp"

namespace fusedmoe::gputest {
namespace {

using cuda::ActivationParams;
using cuda::Dequant;
using cuda::Fp8Quant;
using cuda::GemmPath;

class StreamGemmAct : public ::testing::TestWithParam<ActCase> {};

TEST_P(StreamGemmAct, SameBytesAsGemmThenActivation) {
  FMOE_REQUIRE_GPU();
  const ActCase c = GetParam();
  GatedActProblem pr(c, {0, 3, 70, 0, 17, 1, 33, 8, 0},
                     static_cast<uint32_t>(c.N * 13 + c.K + static_cast<int>(c.act) * 7 + c.interleaved));
  cuda::GroupedGemmArgs& g = pr.g;
  const ActivationParams& p = pr.p;
  const int64_t rows = pr.rows;
  const size_t elem = pr.elem;
  g.small_m_ok = false;
  ASSERT_TRUE(cuda::stream_gemm_takes(g, GemmPath::SM90_TMA)) << "the GEMM must be the stream GEMM's";
  ASSERT_TRUE(cuda::stream_gemm1_act_applies(g, GemmPath::SM90_TMA, p)) << "the case must take the fused path";

  auto run = [&](bool fused, cuda::StreamTile tile = cuda::StreamTile::AUTO) {
    return pr.poisoned_run([&] {
      if (fused) {
        cuda::stream_gemm1_activation(g, p, nullptr, tile);
      } else {
        cuda::stream_grouped_gemm(g, GemmPath::SM90_TMA, nullptr, tile);
        cuda::launch_activation(p, rows, nullptr);
      }
    });
  };
  const auto unfused = run(false);
  const auto fused = run(true);
  int64_t poisoned = 0;
  for (size_t i = 0; i < unfused.size(); ++i) poisoned += unfused[i] == 0xA5;
  ASSERT_LT(poisoned, static_cast<int64_t>(unfused.size() / 16)) << "the unfused pair did not write its output";
  for (size_t i = 0; i < fused.size(); ++i)
    ASSERT_EQ(unfused[i], fused[i]) << "byte " << i << " (row " << i / elem / c.N << ", output "
                                    << (i / elem) % c.N << ")";

  // Replayed from a CUDA graph: the same bytes.
  cudaStream_t s;
  FMOE_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  FMOE_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  cuda::stream_gemm1_activation(g, p, s);
  FMOE_CUDA(cudaStreamEndCapture(s, &graph));
  FMOE_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  FMOE_CUDA(cudaMemset(pr.out_d.get(), 0xA5, pr.out_d.bytes()));
  FMOE_CUDA(cudaGraphLaunch(exec, s));
  FMOE_CUDA(cudaStreamSynchronize(s));
  const auto replay = pr.download_out();
  FMOE_CUDA(cudaGraphExecDestroy(exec));
  FMOE_CUDA(cudaGraphDestroy(graph));
  FMOE_CUDA(cudaStreamDestroy(s));
  ASSERT_EQ(fused, replay) << "graph replay differs";
  // With the 128-row token tile: the same bytes as the GEMM + activation pair on that tile, and for
  // 16-bit operands as the 64-row tile (fp8 sums the whole k in the wgmma's registers there).
  const auto wide = run(true, cuda::StreamTile::WIDE);
  EXPECT_EQ(wide, run(false, cuda::StreamTile::WIDE)) << "the wide token tile's fused output differs from its pair";
  if (c.op != Operand::FP8) EXPECT_EQ(fused, wide) << "the wide token tile differs";
  // With the 256-row token tile (the 70-row expert at wgmma width 96, the others at 64; stages in
  // flight): the same bytes as its pair, and for 16-bit operands as the 64-row tile.
  const auto tall = run(true, cuda::StreamTile::TALL);
  EXPECT_EQ(tall, run(false, cuda::StreamTile::TALL)) << "the tall token tile's fused output differs from its pair";
  if (c.op != Operand::FP8) EXPECT_EQ(fused, tall) << "the tall token tile differs";
  // As a grid of at most one CTA per SM (the deep ring, one weight block per CTA): the same bytes.
  g.sm_count = 1 << 20;
  EXPECT_EQ(fused, run(true)) << "the small-grid launch differs";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, StreamGemmAct,
    ::testing::Values(ActCase{Operand::BF16, Activation::SILU, false, GateUpOrder::GATE_UP, false, 384, 2048},
                      ActCase{Operand::BF16, Activation::GELU, true, GateUpOrder::GATE_UP, true, 104, 768},
                      ActCase{Operand::FP16, Activation::GELU_TANH, false, GateUpOrder::UP_GATE, true, 384, 768},
                      ActCase{Operand::BF16, Activation::SWIGLUOAI, true, GateUpOrder::UP_GATE, true, 768, 256},
                      ActCase{Operand::FP8, Activation::SILU, false, GateUpOrder::GATE_UP, false, 768, 2048},
                      ActCase{Operand::FP8, Activation::SWIGLUOAI, false, GateUpOrder::UP_GATE, true, 104, 256},
                      ActCase{Operand::FP8, Activation::GELU, true, GateUpOrder::GATE_UP, false, 384, 784},
                      ActCase{Operand::FP8, Activation::SILU, true, GateUpOrder::UP_GATE, true, 136, 1024}),
    [](const auto& info) { return act_case_name(info.param); });

// fp8-block (stream_gemm1_block_activation): GEMM1 with its block scales promoted per k block and
// the activation in the epilogue, stored as bf16 rows, then the activation kernel's quantise-only
// pass (1 x 128 groups), against stream_grouped_gemm writing h and the activation kernel
// quantising it: the same codes and group scales, bit for bit. Activation scales and weight block
// scales random per (row or 128-row block, k block), so a gate block's scale used for an up row,
// or one k block's for another, changes the sums.
struct BlockActCase {
  Activation act;
  GateUpOrder order;
  bool bias;
  int64_t N, K;
};

class StreamGemmBlockAct : public ::testing::TestWithParam<BlockActCase> {};

TEST_P(StreamGemmBlockAct, SameBytesAsGemmThenActivation) {
  FMOE_REQUIRE_GPU();
  const BlockActCase bc = GetParam();
  const ActCase c{Operand::FP8, bc.act, false, bc.order, bc.bias, bc.N, bc.K};
  GatedActProblem pr(c, {0, 3, 70, 0, 17, 1, 33, 8, 0}, static_cast<uint32_t>(bc.N * 7 + bc.K + static_cast<int>(bc.act)));
  cuda::GroupedGemmArgs& g = pr.g;
  cuda::ActivationParams& p = pr.p;
  const int64_t rows = pr.rows, kblocks = c.K / 128, groups = c.N / 128;
  std::mt19937 rng(static_cast<uint32_t>(bc.N + 3 * bc.K));
  std::uniform_real_distribution<float> ud(0.25f, 2.0f);
  // Activation scales: expert e's [kblocks, rows_e] column-major from offsets[e] * kblocks on
  // (= a [rows * kblocks] array); weight block scales [E, 2N / 128, kblocks].
  std::vector<float> a_scale(rows * kblocks), b_scale(pr.E * (pr.R / 128) * kblocks);
  for (auto& v : a_scale) v = ud(rng);
  for (auto& v : b_scale) v = ud(rng);
  DeviceBuffer as_d = upload_vector(a_scale), bs_d = upload_vector(b_scale);
  DeviceBuffer gs_d(rows * groups * 4), act16_d(rows * c.N * 2);
  g.a_scale = static_cast<const float*>(as_d.get());
  g.b_scale = static_cast<const float*>(bs_d.get());
  g.small_m_ok = false;
  p.dq = {};
  p.quant = Fp8Quant::BLOCK;
  p.act_dtype = DType::BF16;
  p.block = {static_cast<float*>(gs_d.get()), static_cast<const int32_t*>(pr.re_d.get()),
             static_cast<const int32_t*>(pr.off_d.get()), false};
  ASSERT_TRUE(cuda::stream_gemm_takes(g, GemmPath::SM90_FP8_BLOCK)) << "the GEMM must be the stream GEMM's";
  ASSERT_TRUE(cuda::stream_gemm1_block_act_applies(g, GemmPath::SM90_FP8_BLOCK, p)) << "the case must take the fused path";

  // Codes and group scales after a run (both outputs poisoned first).
  auto run = [&](auto launch) {
    FMOE_CUDA(cudaMemset(gs_d.get(), 0xA5, gs_d.bytes()));
    FMOE_CUDA(cudaMemset(act16_d.get(), 0xA5, act16_d.bytes()));
    std::vector<uint8_t> out = pr.poisoned_run(launch);
    std::vector<uint8_t> gs(gs_d.bytes());
    gs_d.download(gs.data(), gs.size());
    out.insert(out.end(), gs.begin(), gs.end());
    return out;
  };
  auto quantise_rows = [&](cudaStream_t s) {
    cuda::ActivationParams q = p;
    q.act_bf16 = static_cast<const uint16_t*>(act16_d.get());
    cuda::launch_activation(q, rows, s);
  };
  const auto unfused = run([&] {
    cuda::stream_grouped_gemm(g, GemmPath::SM90_FP8_BLOCK, nullptr);
    cuda::launch_activation(p, rows, nullptr);
  });
  const auto fused = run([&] {
    cuda::stream_gemm1_block_activation(g, p, act16_d.get(), nullptr);
    quantise_rows(nullptr);
  });
  int64_t poisoned = 0;
  const int64_t code_bytes = rows * c.N;
  for (int64_t i = 0; i < code_bytes; ++i) poisoned += unfused[i] == 0xA5;
  ASSERT_LT(poisoned, code_bytes / 16) << "the unfused pair did not write its output";
  for (size_t i = 0; i < fused.size(); ++i) {
    const int64_t j = static_cast<int64_t>(i);
    ASSERT_EQ(unfused[i], fused[i]) << (j < code_bytes ? "code byte " + std::to_string(j) + " (row " + std::to_string(j / c.N) + ", output " + std::to_string(j % c.N) + ")"
                                                         : "group scale byte " + std::to_string(j - code_bytes));
  }
  // Replayed from a CUDA graph, and as a grid of at most one CTA per SM: the same bytes.
  cudaStream_t s;
  FMOE_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  FMOE_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  cuda::stream_gemm1_block_activation(g, p, act16_d.get(), s);
  quantise_rows(s);
  FMOE_CUDA(cudaStreamEndCapture(s, &graph));
  FMOE_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  const auto replay = run([&] {
    FMOE_CUDA(cudaGraphLaunch(exec, s));
    FMOE_CUDA(cudaStreamSynchronize(s));
  });
  FMOE_CUDA(cudaGraphExecDestroy(exec));
  FMOE_CUDA(cudaGraphDestroy(graph));
  FMOE_CUDA(cudaStreamDestroy(s));
  ASSERT_EQ(fused, replay) << "graph replay differs";
  g.sm_count = 1 << 20;
  EXPECT_EQ(fused, run([&] {
              cuda::stream_gemm1_block_activation(g, p, act16_d.get(), nullptr);
              quantise_rows(nullptr);
            }))
      << "the small-grid launch differs";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, StreamGemmBlockAct,
    ::testing::Values(BlockActCase{Activation::SILU, GateUpOrder::GATE_UP, false, 384, 2048},
                      BlockActCase{Activation::GELU, GateUpOrder::UP_GATE, true, 128, 1024},
                      BlockActCase{Activation::SWIGLUOAI, GateUpOrder::GATE_UP, true, 256, 512},
                      BlockActCase{Activation::GELU_TANH, GateUpOrder::UP_GATE, false, 768, 256}),
    [](const auto& info) {
      const BlockActCase& c = info.param;
      const char* act = c.act == Activation::SILU ? "silu" : c.act == Activation::GELU ? "gelu"
                        : c.act == Activation::GELU_TANH ? "gelutanh" : "swigluoai";
      return std::string(act) + (c.order == GateUpOrder::UP_GATE ? "_upgate" : "") + (c.bias ? "_bias" : "") + "_N" +
             std::to_string(c.N) + "_K" + std::to_string(c.K);
    });

// What the fp8-block fused path refuses.
TEST(StreamGemmBlockActRules, Refuses) {
  cuda::GroupedGemmArgs g;
  alignas(16) static uint8_t dummy[64];
  alignas(16) static float scales[4];
  g.op = Operand::FP8;
  g.a = g.b = dummy;
  g.a_scale = g.b_scale = scales;
  g.groups = 128;
  g.n = 1536;
  g.k = 2048;
  g.max_rows = 2048;  // Qwen3-30B-A3B at 256 tokens: 16 rows per expert
  ActivationParams p;
  p.R = 1536;
  p.N = 768;
  p.op = Operand::FP8;
  p.quant = Fp8Quant::BLOCK;
  p.act_dtype = DType::BF16;
  EXPECT_TRUE(cuda::stream_gemm1_block_act_applies(g, GemmPath::SM90_FP8_BLOCK, p));
  EXPECT_FALSE(cuda::stream_gemm1_block_act_applies(g, GemmPath::SM90_TMA, p));  // not block-scaled
  EXPECT_FALSE(cuda::stream_gemm1_act_applies(g, GemmPath::SM90_FP8_BLOCK, p));  // the other entry point's
  p.interleaved = true;  // halves only
  EXPECT_FALSE(cuda::stream_gemm1_block_act_applies(g, GemmPath::SM90_FP8_BLOCK, p));
  EXPECT_THROW(cuda::stream_gemm1_block_activation(g, p, dummy, nullptr), Error);
  p.interleaved = false;
  p.act = Activation::RELU2;  // not gated
  EXPECT_FALSE(cuda::stream_gemm1_block_act_applies(g, GemmPath::SM90_FP8_BLOCK, p));
  p.act = Activation::SILU;
  p.act_dtype = DType::F32;  // the quantise pass reads bf16 rows
  EXPECT_FALSE(cuda::stream_gemm1_block_act_applies(g, GemmPath::SM90_FP8_BLOCK, p));
  p.act_dtype = DType::BF16;
  p.quant = Fp8Quant::TENSOR_STATIC;  // not the block format's activation
  EXPECT_FALSE(cuda::stream_gemm1_block_act_applies(g, GemmPath::SM90_FP8_BLOCK, p));
  p.quant = Fp8Quant::BLOCK;
  g.n = p.R = 2 * 704;  // N not a multiple of 128
  p.N = 704;
  EXPECT_FALSE(cuda::stream_gemm1_block_act_applies(g, GemmPath::SM90_FP8_BLOCK, p));
  g.n = p.R = 1536;
  p.N = 768;
  g.max_rows = 128 * 64;  // 64 rows per expert: the large blockwise instance (its own fused epilogue)
  EXPECT_FALSE(cuda::stream_gemm1_block_act_applies(g, GemmPath::SM90_FP8_BLOCK, p));
  EXPECT_THROW(cuda::stream_gemm1_block_activation(g, p, dummy, nullptr), Error);
  g.max_rows = 2048;
  EXPECT_THROW(cuda::stream_gemm1_block_activation(g, p, nullptr, nullptr), Error);  // no rows buffer
}

// fp8 layers at 49-64 rows per expert (240 rows over 4 experts): GEMM1 (k = 4096 / 1024) on the
// stream GEMM's 128-row token tile, which sums the whole k in the wgmma's registers
// (stream_wide_tile_ok; fused with the activation for static fp8-tensor), GEMM2 (k = 256) on the
// large configs, against the float64 oracle.
TEST(StreamGemmWideFp8Layer, MatchesOracle) {
  FMOE_REQUIRE_GPU();
  for (int variant = 0; variant < 4; ++variant) {
    Case c;
    c.format = variant == 2 ? Format::FP8_CHANNEL : Format::FP8_TENSOR;
    c.fp8_static = variant == 0 || variant == 3;
    c.M = 120;
    c.topk = 2;
    c.E = 4;
    c.K = variant == 3 ? 1024 : 4096;
    c.N = 256;
    c.bias = variant == 1;
    c.seed = 7300u + variant;
    SCOPED_TRACE(describe(c));
    cuda::GroupedGemmArgs g1;
    g1.op = Operand::FP8;
    g1.groups = static_cast<int>(c.E);
    g1.n = 2 * c.N;
    g1.k = c.K;
    g1.max_rows = c.M * c.topk;
    ASSERT_TRUE(cuda::sm90_use_small_config(g1) && cuda::stream_wide_tile_ok(g1));
    check_case(c);
  }
}

// What the fused path refuses (the layer then runs the stream GEMM and the activation kernel).
TEST(StreamGemmActRules, Refuses) {
  cuda::GroupedGemmArgs g;
  alignas(16) static uint8_t dummy[64];
  g.op = Operand::BF16;
  g.a = g.b = dummy;
  g.groups = 128;
  g.n = 1536;
  g.k = 2048;
  g.max_rows = 512;  // Qwen3-30B-A3B at 64 tokens: 4 rows per expert
  ActivationParams p;
  p.R = 1536;
  p.N = 768;
  p.op = Operand::BF16;
  EXPECT_TRUE(cuda::stream_gemm1_act_applies(g, GemmPath::SM90_TMA, p));
  EXPECT_FALSE(cuda::stream_gemm1_act_applies(g, GemmPath::SM90_FP8_BLOCK, p));  // 1 x 128 quantisation
  p.act = Activation::RELU2;  // not gated
  EXPECT_FALSE(cuda::stream_gemm1_act_applies(g, GemmPath::SM90_TMA, p));
  p.act = Activation::SILU;
  g.n = p.R = 2 * 764;  // N not a multiple of 8 (the map's 8-row groups)
  p.N = 764;
  EXPECT_FALSE(cuda::stream_gemm1_act_applies(g, GemmPath::SM90_TMA, p));
  EXPECT_THROW(cuda::stream_gemm1_activation(g, p, nullptr), Error);
  g.n = p.R = 1536;
  p.N = 768;
  g.op = p.op = Operand::FP8;
  p.quant = Fp8Quant::TENSOR_DYNAMIC;  // needs the amax of every output first
  EXPECT_FALSE(cuda::stream_gemm1_act_applies(g, GemmPath::SM90_TMA, p));
  p.quant = Fp8Quant::TENSOR_STATIC;
  EXPECT_TRUE(cuda::stream_gemm1_act_applies(g, GemmPath::SM90_TMA, p));
  p.dq.kind = Dequant::CHANNEL;  // per-column dequant: the row store does not take it
  EXPECT_FALSE(cuda::stream_gemm1_act_applies(g, GemmPath::SM90_TMA, p));
  p.dq.kind = Dequant::NONE;
  g.groups = 8;  // Mixtral-8x7B's halves, 14336 x 4096 fp8 bytes (59 MB) apart: left unfused
  g.n = p.R = 2 * 14336;
  p.N = 14336;
  g.k = 4096;
  g.max_rows = 4;
  g.small_m_ok = false;  // 2 tokens: the layer's decode fusions do not pay, the stream GEMM's call
  EXPECT_TRUE(cuda::stream_gemm_takes(g, GemmPath::SM90_TMA));
  EXPECT_FALSE(cuda::stream_gemm1_act_applies(g, GemmPath::SM90_TMA, p));
  p.interleaved = true;  // gate and up rows adjacent
  EXPECT_TRUE(cuda::stream_gemm1_act_applies(g, GemmPath::SM90_TMA, p));
  p.interleaved = false;
  g.max_rows = 8 * 64;  // 256 tokens, 64 rows per expert: the wide token tile fuses far halves too
  EXPECT_TRUE(cuda::stream_gemm_takes(g, GemmPath::SM90_TMA));
  EXPECT_TRUE(cuda::stream_gemm1_act_applies(g, GemmPath::SM90_TMA, p));
  g.max_rows = 8 * 48;  // 48 rows per expert: the 64-row tile, far halves unfused
  EXPECT_TRUE(cuda::stream_gemm_takes(g, GemmPath::SM90_TMA));
  EXPECT_FALSE(cuda::stream_gemm1_act_applies(g, GemmPath::SM90_TMA, p));
  g.small_m_ok = true;
  g.groups = 128;
  g.n = p.R = 1536;
  p.N = 768;
  g.k = 2048;
  g.max_rows = 128 * 64;  // 64 rows per expert: fp8 on the stream GEMM's wide tile, fused
  EXPECT_TRUE(cuda::stream_gemm1_act_applies(g, GemmPath::SM90_TMA, p));
  g.max_rows = 128 * 64 + 128;  // more than 64 rows per expert: the large configs (their own fused epilogue)
  EXPECT_FALSE(cuda::stream_gemm1_act_applies(g, GemmPath::SM90_TMA, p));
}

}  // namespace
}  // namespace fusedmoe::gputest
