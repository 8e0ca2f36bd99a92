// GEMM2 + finalize in one kernel (small_m_finalize.cu) against the two kernels it replaces
// (small-M GEMM2, then finalize) on the same inputs: the same bits, for every dequant kind, bias,
// router weight on the input, top-k from 1 to 8, slots without a row (ids out of range), output
// dtypes, hidden sizes that are not a multiple of a block's columns, and short and long rows. And
// against a float64 host sum with fp32 outputs (poisoned before each run).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/grouped_gemm.hpp"
#include "cuda/moe_kernels.hpp"
#include "cuda/small_m_finalize.hpp"
#include "gpu/gpu_test_util.hpp"
#include "gpu/operand_util.hpp"

namespace fusedmoe::gputest {
namespace {

using cuda::Dequant;
using cuda::FinalizeParams;

struct FusedCase {
  Operand op;
  Dequant::Kind dq;
  int64_t M, topk, K, N;  // K: hidden (GEMM2 n, output columns); N: intermediate (GEMM2 k)
  bool bias, on_input;
  DType out;
  bool block = false;  // fp8-block: 1x128 activation / 128x128 weight scales inside the GEMM
};

std::string name_of(const FusedCase& c) {
  return std::string(c.op == Operand::BF16 ? "bf16" : c.op == Operand::FP16 ? "fp16" : "fp8") +
         (c.dq == Dequant::TENSOR ? "_tensor" : c.dq == Dequant::CHANNEL ? "_channel" : "") +
         (c.block ? "_block" : "") + "_M" +
         std::to_string(c.M) + "_top" + std::to_string(c.topk) + "_K" + std::to_string(c.K) + "_N" +
         std::to_string(c.N) + (c.bias ? "_bias" : "") + (c.on_input ? "_oninput" : "") +
         (c.out == DType::F32 ? "_f32" : c.out == DType::F16 ? "_f16" : "_bf16");
}

class SmallMFinalize : public ::testing::TestWithParam<FusedCase> {};

TEST_P(SmallMFinalize, SameBitsAsGemmThenFinalize) {
  FMOE_REQUIRE_GPU();
  const FusedCase c = GetParam();
  constexpr int E = 40;
  std::mt19937 rng(static_cast<uint32_t>(c.K * 31 + c.N + c.topk * 7 + c.M + static_cast<int>(c.dq) * 3));
  // Slots: distinct experts per token, every 5th slot out of range (no row).
  const int64_t slots = c.M * c.topk;
  std::vector<int32_t> slot_expert(slots);
  for (int64_t t = 0; t < c.M; ++t)
    for (int64_t k = 0; k < c.topk; ++k) {
      const int64_t i = t * c.topk + k;
      slot_expert[i] = i % 5 == 3 ? -1 : static_cast<int32_t>((t * 13 + k * 7 + rng() % 3) % E);
    }
  for (int64_t t = 0; t < c.M; ++t)  // distinct within a token (rows are ordered by slot anyway)
    for (int64_t k = 1; k < c.topk; ++k)
      for (int64_t j = 0; j < k; ++j)
        if (slot_expert[t * c.topk + k] >= 0 && slot_expert[t * c.topk + k] == slot_expert[t * c.topk + j])
          slot_expert[t * c.topk + k] = (slot_expert[t * c.topk + k] + 1 + static_cast<int32_t>(k)) % E;
  // The plan: rows by expert, then slot.
  std::vector<int32_t> counts(E, 0), offsets(E + 1, 0), slot_row(slots, -1);
  for (int32_t e : slot_expert)
    if (e >= 0) ++counts[e];
  for (int e = 0; e < E; ++e) offsets[e + 1] = offsets[e] + counts[e];
  const int64_t rows = offsets[E];
  std::vector<int32_t> next(offsets.begin(), offsets.end() - 1), row_expert(std::max<int64_t>(rows, 1), 0);
  for (int64_t i = 0; i < slots; ++i)
    if (slot_expert[i] >= 0) {
      slot_row[i] = next[slot_expert[i]]++;
      row_expert[slot_row[i]] = slot_expert[i];
    }

  const Operands a = random_operand(c.op, std::max<int64_t>(rows, 1) * c.N, 1.0f, rng);
  const size_t elem = c.op == Operand::FP8 ? 1 : 2, expert_bytes = static_cast<size_t>(c.K * c.N) * elem;
  std::vector<Operands> w(E);
  DeviceBuffer a_d(a.bytes.size()), w_d(E * expert_bytes);
  a_d.upload(a.bytes.data(), a.bytes.size());
  FMOE_CUDA(cudaMemset(w_d.get(), 0xFF, E * expert_bytes));  // NaN: experts without rows are never read
  for (int e = 0; e < E; ++e)
    if (counts[e] > 0) {
      w[e] = random_operand(c.op, c.K * c.N, 0.05f, rng);
      FMOE_CUDA(cudaMemcpy(static_cast<char*>(w_d.get()) + e * expert_bytes, w[e].bytes.data(), expert_bytes,
                           cudaMemcpyHostToDevice));
    }
  std::uniform_real_distribution<float> ud(0.5f, 1.5f);
  std::vector<float> topk_w(slots), a_row(std::max<int64_t>(rows, 1)), w_tensor(E), w_channel(E * c.K), bias(E * c.K);
  for (auto& v : topk_w) v = ud(rng);
  for (auto& v : a_row) v = ud(rng) * 0.01f;
  for (auto& v : w_tensor) v = ud(rng) * 0.02f;
  for (auto& v : w_channel) v = ud(rng) * 0.02f;
  for (auto& v : bias) v = ud(rng) - 1.0f;
  const float a_tensor = 0.03f;
  // fp8-block scales: activations in the BLOCK layout (expert e's rows own [N/128, rows_e]
  // column-major from offsets[e] * N/128 on), weights [E, K/128, N/128].
  const int64_t kbs = c.N / 128, nbs = c.K / 128;
  std::vector<float> a_blk(c.block ? std::max<int64_t>(rows, 1) * kbs : 1), w_blk(c.block ? E * nbs * kbs : 1);
  for (auto& v : a_blk) v = ud(rng) * 0.01f;
  for (auto& v : w_blk) v = ud(rng) * 0.02f;
  auto a_scale_of = [&](int64_t r, int64_t kb) {
    const int e = row_expert[r];
    return a_blk[offsets[e] * kbs + kb * counts[e] + (r - offsets[e])];
  };
  auto upload = [](const auto& v) {
    DeviceBuffer b(v.size() * sizeof(v[0]));
    b.upload(v.data(), v.size() * sizeof(v[0]));
    return b;
  };
  auto off_d = upload(offsets), slot_row_d = upload(slot_row), row_expert_d = upload(row_expert),
       topk_w_d = upload(topk_w), a_row_d = upload(a_row), w_tensor_d = upload(w_tensor),
       w_channel_d = upload(w_channel), bias_d = upload(bias), a_tensor_d = upload(std::vector<float>{a_tensor}),
       a_blk_d = upload(a_blk), w_blk_d = upload(w_blk);
  const size_t out_elem = c.out == DType::F32 ? 4 : 2;
  DeviceBuffer y_d(std::max<int64_t>(rows, 1) * c.K * 4), out1_d(c.M * c.K * out_elem), out2_d(c.M * c.K * out_elem);

  cuda::GroupedGemmArgs g;
  g.op = c.op;
  g.a = a_d.get();
  g.b = w_d.get();
  g.d = static_cast<float*>(y_d.get());
  g.n = c.K;
  g.k = c.N;
  g.groups = E;
  g.expert_offsets = static_cast<const int32_t*>(off_d.get());
  g.max_rows = slots;
  if (c.block) {
    g.a_scale = static_cast<const float*>(a_blk_d.get());
    g.b_scale = static_cast<const float*>(w_blk_d.get());
  }
  FinalizeParams p;
  p.y = static_cast<const float*>(y_d.get());
  p.M = c.M;
  p.K = c.K;
  p.topk = c.topk;
  p.slot_row = static_cast<const int32_t*>(slot_row_d.get());
  p.row_expert = static_cast<const int32_t*>(row_expert_d.get());
  p.topk_weights = static_cast<const float*>(topk_w_d.get());
  p.on_input = c.on_input;
  p.bias = c.bias ? static_cast<const float*>(bias_d.get()) : nullptr;
  p.dq.kind = c.dq;
  if (c.dq == Dequant::TENSOR) {
    p.dq.a_tensor = {static_cast<const float*>(a_tensor_d.get()), false};
    p.dq.w = static_cast<const float*>(w_tensor_d.get());
  }
  if (c.dq == Dequant::CHANNEL) {
    p.dq.a_row = static_cast<const float*>(a_row_d.get());
    p.dq.w = static_cast<const float*>(w_channel_d.get());
  }
  p.out_dtype = c.out;
  ASSERT_TRUE(cuda::small_m_finalize_applies(g, p)) << "the case must take the fused path";

  auto run = [&](bool fused, DeviceBuffer& out) {
    FMOE_CUDA(cudaMemset(out.get(), 0xFF, out.bytes()));  // NaN poison
    p.out = out.get();
    if (fused) {
      cuda::small_m_gemm2_finalize(g, p, nullptr, c.block);
    } else {
      cuda::small_m_grouped_gemm(g, nullptr, c.block);
      cuda::launch_finalize(p, nullptr);
    }
    FMOE_CUDA(cudaDeviceSynchronize());
    std::vector<uint8_t> h(out.bytes());
    out.download(h.data(), h.size());
    return h;
  };
  const auto unfused = run(false, out1_d);
  const auto fused = run(true, out2_d);
  ASSERT_EQ(0, std::memcmp(unfused.data(), fused.data(), fused.size())) << "fused and unfused outputs differ";
  ASSERT_EQ(0, std::memcmp(fused.data(), run(true, out2_d).data(), fused.size())) << "two fused runs differ";

  if (c.out != DType::F32) return;  // the rounding to 16 bits is finalize's own (tested elsewhere)
  std::vector<float> got(c.M * c.K);
  std::memcpy(got.data(), fused.data(), fused.size());
  for (int64_t t = 0; t < c.M; ++t)
    for (int64_t col = 0; col < c.K; ++col) {
      double ref = 0.0, mag = 0.0;
      for (int64_t k = 0; k < c.topk; ++k) {
        const int64_t i = t * c.topk + k;
        const int32_t r = slot_row[i];
        if (r < 0) continue;
        const int e = slot_expert[i];
        double y = 0.0, ym = 0.0;
        for (int64_t j = 0; j < c.N; ++j) {
          double pr = static_cast<double>(a.values[r * c.N + j]) * w[e].values[col * c.N + j];
          if (c.block) pr *= static_cast<double>(a_scale_of(r, j / 128)) * w_blk[(e * nbs + col / 128) * kbs + j / 128];
          y += pr;
          ym += std::fabs(pr);
        }
        double f = 1.0;
        if (c.dq == Dequant::TENSOR) f = static_cast<double>(a_tensor) * w_tensor[e];
        if (c.dq == Dequant::CHANNEL) f = static_cast<double>(a_row[r]) * w_channel[e * c.K + col];
        const double b = c.bias ? bias[e * c.K + col] : 0.0, wt = c.on_input ? 1.0 : topk_w[i];
        ref += wt * (y * f + b);
        mag += wt * (ym * std::fabs(f) + std::fabs(b));
      }
      const float v = got[t * c.K + col];
      ASSERT_TRUE(std::isfinite(v)) << "token " << t << " col " << col << " not written";
      ASSERT_LE(std::fabs(v - ref), 1e-5 * mag + 1e-30) << "token " << t << " col " << col << " got " << v
                                                        << " want " << ref;
    }
}

// Rows of 256 B (fp8 N=256: 4 lanes per row), 512 / 1536 B (bf16 N=256 / 768: 8 / 32 lanes),
// 1296 B (fp8 N=1296: 32 lanes, a partial last pass); K=98 and 200 leave a block's columns
// partial (and K=98 takes finalize's scalar kernel, K % 4 != 0); top-k 1, 2, 6, 8 select 1, 2,
// 4, 8 slot warps.
// The decode fusions are taken beyond one token only where few slots can share an expert:
// (M - 1) * topk * 8 <= E.
TEST(SmallMFusionRule, SharedExpertsKeepTheUnfusedKernels) {
  EXPECT_TRUE(cuda::small_m_fusion_pays(1, 2, 8));     // Mixtral, one token: nothing to share
  EXPECT_FALSE(cuda::small_m_fusion_pays(2, 2, 8));    // Mixtral, two tokens: 2 * 8 > 8
  EXPECT_TRUE(cuda::small_m_fusion_pays(2, 8, 128));   // Qwen3-30B-A3B, two tokens: 64 <= 128
  EXPECT_TRUE(cuda::small_m_fusion_pays(2, 8, 256));   // DeepSeek-V3
  EXPECT_FALSE(cuda::small_m_fusion_pays(2, 8, 32));   // 64 > 32
  EXPECT_FALSE(cuda::small_m_fusion_pays(0, 8, 256));  // nothing to fuse
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SmallMFinalize,
    ::testing::Values(FusedCase{Operand::BF16, Dequant::NONE, 1, 8, 2048, 768, false, false, DType::F32},
                      FusedCase{Operand::BF16, Dequant::NONE, 2, 6, 98, 256, true, false, DType::BF16},
                      FusedCase{Operand::FP16, Dequant::NONE, 1, 2, 200, 768, true, true, DType::F16},
                      FusedCase{Operand::FP8, Dequant::TENSOR, 1, 8, 2048, 256, false, false, DType::F32},
                      FusedCase{Operand::FP8, Dequant::TENSOR, 2, 8, 1000, 1296, true, false, DType::BF16},
                      FusedCase{Operand::FP8, Dequant::CHANNEL, 1, 6, 2048, 768, true, false, DType::F32},
                      FusedCase{Operand::FP8, Dequant::CHANNEL, 2, 1, 98, 1296, false, true, DType::BF16},
                      FusedCase{Operand::BF16, Dequant::NONE, 1, 1, 4096, 1296, false, false, DType::F32},
                      // fp8-block: Qwen3 (K 2048, N 768, 32 lanes per row), DeepSeek-V3 TP8 (N 256:
                      // 4 lanes, two k blocks), bias and router weight on the input, K = 1152 (the
                      // last column block partial).
                      FusedCase{Operand::FP8, Dequant::NONE, 1, 8, 2048, 768, false, false, DType::F32, true},
                      FusedCase{Operand::FP8, Dequant::NONE, 2, 8, 7168, 256, true, false, DType::BF16, true},
                      FusedCase{Operand::FP8, Dequant::NONE, 1, 6, 1152, 384, true, true, DType::F32, true}),
    [](const auto& info) { return name_of(info.param); });

}  // namespace
}  // namespace fusedmoe::gputest
