// The 4-bit GEMM2 + finalize in one kernel (w4_mma_gemm2_finalize, w4_gemm.cu: the last block of
// each column group sums the top-k) against the two kernels it replaces (the mma GEMM2, then the
// finalize kernel) on the same inputs: the same bits, for MXFP4 (its tail instance included: k % 256
// = 128), NVFP4 and W4A8, the 4-bit GENERIC dequant (per-row activation scale, NVFP4's per-expert
// weight scale), bias, router weight on the input, slots without a row, every output dtype, top-k 1
// to 8 and up to the 512 slots it takes. The column counters must end at one count per block of the
// column group (every block counted once), and a second run on re-zeroed counters writes the same
// bytes. Calls it does not take are refused without a launch.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/moe_kernels.hpp"
#include "cuda/w4_gemm.hpp"
#include "gpu/gpu_test_util.hpp"
#include "gpu/operand_util.hpp"

namespace fusedmoe::gputest {
namespace {

using cuda::Dequant;
using cuda::FinalizeParams;

struct FinCase {
  Format format;
  int64_t M, topk, K, N;  // K: hidden (GEMM2 n, output columns); N: intermediate (GEMM2 k)
  bool bias, on_input, a_row;
  DType out;
  int E = 40;  // experts (enough that the rows per expert stay <= 8: the 8-token tile it takes)
};

std::string name_of(const FinCase& c) {
  return std::string(c.format == Format::MXFP4 ? "mxfp4" : c.format == Format::NVFP4 ? "nvfp4" : "w4a8") + "_M" +
         std::to_string(c.M) + "_top" + std::to_string(c.topk) + "_K" + std::to_string(c.K) + "_N" +
         std::to_string(c.N) + "_E" + std::to_string(c.E) + (c.bias ? "_bias" : "") + (c.on_input ? "_oninput" : "") +
         (c.a_row ? "_arow" : "") + (c.out == DType::F32 ? "_f32" : c.out == DType::F16 ? "_f16" : "_bf16");
}

template <typename T>
DeviceBuffer upload(const std::vector<T>& v) {
  DeviceBuffer b(std::max<size_t>(v.size(), 1) * sizeof(T));
  if (!v.empty()) b.upload(v.data(), v.size() * sizeof(T));
  return b;
}

class W4Fin : public ::testing::TestWithParam<FinCase> {};

TEST_P(W4Fin, SameBitsAsGemmThenFinalize) {
  FMOE_REQUIRE_GPU();
  const FinCase c = GetParam();
  const int E = c.E;
  std::mt19937 rng(static_cast<uint32_t>(c.K * 31 + c.N + c.topk * 7 + c.M + static_cast<int>(c.format) * 3));
  // Slots: distinct experts per token, every 5th slot out of range (no row); the plan: rows by
  // expert, then slot.
  const int64_t slots = c.M * c.topk;
  std::vector<int32_t> slot_expert(slots);
  for (int64_t t = 0; t < c.M; ++t)
    for (int64_t k = 0; k < c.topk; ++k) {
      const int64_t i = t * c.topk + k;
      int32_t e = i % 5 == 3 ? -1 : static_cast<int32_t>((t * 13 + k * 7 + rng() % 3) % E);
      for (int64_t j = 0; j < k && e >= 0; ++j)
        if (slot_expert[t * c.topk + j] == e) e = (e + 1 + static_cast<int32_t>(k)) % E, j = -1;
      slot_expert[i] = e;
    }
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

  // Weights: random packed codes (every nibble is a value of each format) and scales in a modest
  // range (MXFP4 e8m0 2^-7..2^2, NVFP4 e4m3 codes 0x28..0x47, W4A8 bf16 around 0.01).
  const int64_t packed = static_cast<int64_t>(E) * c.K * c.N / 2;
  std::vector<uint8_t> w(packed);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  const int64_t bs = c.format == Format::MXFP4 ? 32 : c.format == Format::NVFP4 ? 16 : 128;
  const int64_t nscales = static_cast<int64_t>(E) * c.K * (c.N / bs);
  std::vector<uint8_t> scale(nscales * (c.format == Format::W4A8_INT4 ? 2 : 1));
  for (int64_t i = 0; i < nscales; ++i) {
    if (c.format == Format::MXFP4) scale[i] = static_cast<uint8_t>(120 + rng() % 10);
    else if (c.format == Format::NVFP4) scale[i] = static_cast<uint8_t>(0x28 + rng() % 32);
    else {
      const uint16_t b = float_to_bf16_bits(0.005f + 0.01f * static_cast<float>(rng() % 100) / 100.0f);
      std::memcpy(&scale[2 * i], &b, 2);
    }
  }
  const Operand op = c.format == Format::W4A8_INT4 ? Operand::FP16 : Operand::BF16;
  const Operands a = random_operand(op, std::max<int64_t>(rows, 1) * c.N, 1.0f, rng);

  std::uniform_real_distribution<float> ud(0.5f, 1.5f);
  std::vector<float> topk_w(slots), a_row(std::max<int64_t>(rows, 1)), w_expert(E), bias(E * c.K);
  for (auto& v : topk_w) v = ud(rng);
  for (auto& v : a_row) v = ud(rng) * 0.01f;
  for (auto& v : w_expert) v = ud(rng) * 0.02f;
  for (auto& v : bias) v = ud(rng) - 1.0f;
  auto w_d = upload(w), scale_d = upload(scale), off_d = upload(offsets), slot_row_d = upload(slot_row),
       row_expert_d = upload(row_expert), topk_w_d = upload(topk_w), a_row_d = upload(a_row),
       w_expert_d = upload(w_expert), bias_d = upload(bias);
  DeviceBuffer a_d(a.bytes.size());
  a_d.upload(a.bytes.data(), a.bytes.size());
  const size_t out_elem = c.out == DType::F32 ? 4 : 2;
  DeviceBuffer y_d(std::max<int64_t>(rows, 1) * c.K * 4), out_d(c.M * c.K * out_elem);
  const int64_t ncounters = cuda::w4_fin_counters(c.K) + 3;  // room past the groups: must stay untouched
  DeviceBuffer counters_d(ncounters * 4);

  cuda::W4Weights wt;
  wt.format = c.format;
  wt.w = static_cast<const uint8_t*>(w_d.get());
  wt.scale = scale_d.get();
  wt.n = c.K;
  wt.k = c.N;
  FinalizeParams p;
  p.y = y_d.get();
  p.y_dtype = DType::F32;
  p.M = c.M;
  p.K = c.K;
  p.topk = c.topk;
  p.slot_row = static_cast<const int32_t*>(slot_row_d.get());
  p.row_expert = static_cast<const int32_t*>(row_expert_d.get());
  p.topk_weights = static_cast<const float*>(topk_w_d.get());
  p.on_input = c.on_input;
  p.bias = c.bias ? static_cast<const float*>(bias_d.get()) : nullptr;
  p.dq.kind = Dequant::GENERIC;
  if (c.a_row) p.dq.a_row = static_cast<const float*>(a_row_d.get());
  if (c.format == Format::NVFP4) p.dq.w_expert = static_cast<const float*>(w_expert_d.get());
  p.out = out_d.get();
  p.out_dtype = c.out;
  const auto* off = static_cast<const int32_t*>(off_d.get());
  auto* y = static_cast<float*>(y_d.get());
  auto* counters = static_cast<int32_t*>(counters_d.get());

  auto run = [&](bool fused) {
    FMOE_CUDA(cudaMemset(out_d.get(), 0xFF, out_d.bytes()));  // NaN poison
    FMOE_CUDA(cudaMemset(y_d.get(), 0xFF, y_d.bytes()));
    FMOE_CUDA(cudaMemset(counters, 0, ncounters * 4));  // as the run's plan does
    if (fused) {
      EXPECT_TRUE(cuda::w4_mma_gemm2_finalize(wt, a_d.get(), y, E, off, slots, p, counters, ncounters, nullptr))
          << "the case must take the fused kernel";
    } else {
      cuda::w4_mma_grouped_gemm(wt, a_d.get(), y, E, off, slots, nullptr);
      cuda::launch_finalize(p, nullptr);
    }
    FMOE_CUDA(cudaDeviceSynchronize());
    std::vector<uint8_t> h(out_d.bytes());
    out_d.download(h.data(), h.size());
    return h;
  };
  const auto unfused = run(false);
  const auto fused = run(true);
  ASSERT_EQ(0, std::memcmp(unfused.data(), fused.data(), fused.size())) << "fused and unfused outputs differ";
  // Every block of a column group counted itself once: min(slots, E) blocks per group.
  std::vector<int32_t> cnt(ncounters);
  counters_d.download(cnt.data(), cnt.size() * 4);
  const int32_t blocks = static_cast<int32_t>(std::min<int64_t>(slots, E));
  for (int64_t g = 0; g < ncounters; ++g)
    EXPECT_EQ(g < cuda::w4_fin_counters(c.K) ? blocks : 0, cnt[g]) << "counter " << g;
  ASSERT_EQ(0, std::memcmp(fused.data(), run(true).data(), fused.size())) << "two fused runs differ";
}

std::vector<FinCase> cases() {
  std::vector<FinCase> v;
  for (Format f : {Format::MXFP4, Format::NVFP4, Format::W4A8_INT4}) {
    // MXFP4 N = 128: k % 256 = 128, the tail instance.
    const int64_t n_short = f == Format::MXFP4 ? 128 : 256;
    v.push_back({f, 2, 8, 256, 256, false, false, false, DType::BF16});
    v.push_back({f, 8, 8, 320, n_short, true, false, true, DType::F32});
    v.push_back({f, 5, 2, 192, 384, true, true, false, DType::F16});
    v.push_back({f, 64, 8, 128, 256, false, false, true, DType::BF16, 128});  // 512 slots: the largest it takes
    v.push_back({f, 37, 1, 256, n_short, true, false, true, DType::F32});
  }
  return v;
}

std::string fin_name(const ::testing::TestParamInfo<FinCase>& info) { return name_of(info.param); }
INSTANTIATE_TEST_SUITE_P(Cases, W4Fin, ::testing::ValuesIn(cases()), fin_name);

// Calls it does not take launch nothing and say so: more than kW4FinMaxSlots slots, a column
// count that is not a multiple of 64, a non-GENERIC dequant, too few counters.
TEST(W4FinEdge, RefusesWhatItDoesNotTake) {
  FMOE_REQUIRE_GPU();
  cuda::W4Weights wt;
  wt.format = Format::MXFP4;
  wt.n = 256;
  wt.k = 256;
  DeviceBuffer y_d(4 * 1024), counters_d(64 * 4), off_d(64 * 4);
  FMOE_CUDA(cudaMemset(off_d.get(), 0, off_d.bytes()));
  FinalizeParams p;
  p.y = y_d.get();
  p.M = 2;
  p.K = 256;
  p.topk = 2;
  p.dq.kind = Dequant::GENERIC;
  auto* y = static_cast<float*>(y_d.get());
  auto* cnt = static_cast<int32_t*>(counters_d.get());
  const auto* off = static_cast<const int32_t*>(off_d.get());
  FinalizeParams big = p;
  big.M = cuda::kW4FinMaxSlots;  // x topk 2: past the limit
  EXPECT_FALSE(cuda::w4_mma_gemm2_finalize(wt, nullptr, y, 1024, off, big.M * 2, big, cnt, 64, nullptr));
  cuda::W4Weights odd = wt;
  odd.n = 224;
  FinalizeParams podd = p;
  podd.K = 224;
  EXPECT_FALSE(cuda::w4_mma_gemm2_finalize(odd, nullptr, y, 8, off, 4, podd, cnt, 64, nullptr));
  FinalizeParams tensor = p;
  tensor.dq.kind = Dequant::TENSOR;
  EXPECT_FALSE(cuda::w4_mma_gemm2_finalize(wt, nullptr, y, 8, off, 4, tensor, cnt, 64, nullptr));
  EXPECT_FALSE(cuda::w4_mma_gemm2_finalize(wt, nullptr, y, 8, off, 4, p, cnt, 3, nullptr));  // needs 4
  EXPECT_FALSE(cuda::w4_mma_gemm2_finalize(wt, nullptr, y, 8, off, 4, p, nullptr, 64, nullptr));
  FMOE_CUDA(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace fusedmoe::gputest
