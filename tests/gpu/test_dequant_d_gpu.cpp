// The per-channel weight scales in the GEMM epilogue (GroupedGemmArgs::d_col_scale: fp8-channel's
// GEMM2 with a bf16 y), on both GEMMs that take it: the stream GEMM (few rows per expert) and
// sm90_grouped_gemm_fp8_d16_dequant.cu (CUTLASS, more rows). Each is checked bitwise against the
// same GEMM's fp32 D without scales: D16[r, c] = bf16(acc[r, c] x w[e, c]) - the same mainloop, so
// the same acc. Experts without rows, partial 128-row tiles and a partial column block / tile; D
// poisoned before each run; the scales are distinct per column and expert, so that a wrong column
// or expert shows.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "cuda/grouped_gemm.hpp"
#include "cuda/stream_gemm.hpp"
#include "fusedmoe/codecs.hpp"
#include "fusedmoe/error.hpp"
#include "gpu/gpu_test_util.hpp"
#include "gpu/operand_util.hpp"

namespace fusedmoe::gputest {
namespace {

using cuda::GemmPath;
using cuda::Operand;

struct DequantProblem {
  std::vector<int32_t> counts, offsets;
  int64_t n, k, rows = 0;
  std::vector<float> col_scale;
  DeviceBuffer a_d, b_d, d_d, off_d, cs_d, ws_d;
  cuda::GroupedGemmArgs g;

  DequantProblem(std::vector<int32_t> counts_, int64_t n_, int64_t k_) : counts(std::move(counts_)), n(n_), k(k_) {
    const int groups = static_cast<int>(counts.size());
    offsets.assign(groups + 1, 0);
    for (int e = 0; e < groups; ++e) offsets[e + 1] = offsets[e] + counts[e];
    rows = offsets[groups];
    std::mt19937 rng(static_cast<uint32_t>(rows * 13 + n * 7 + k));
    const Operands a = random_operand(Operand::FP8, rows * k, 1.0f, rng);
    a_d = DeviceBuffer(a.bytes.size());
    a_d.upload(a.bytes.data(), a.bytes.size());
    b_d = DeviceBuffer(static_cast<size_t>(groups * n * k));
    FMOE_CUDA(cudaMemset(b_d.get(), 0xFF, groups * n * k));  // NaN codes for experts without rows
    for (int e = 0; e < groups; ++e)
      if (counts[e] > 0) {
        const Operands b = random_operand(Operand::FP8, n * k, 0.05f, rng);
        FMOE_CUDA(cudaMemcpy(static_cast<char*>(b_d.get()) + e * n * k, b.bytes.data(), n * k, cudaMemcpyHostToDevice));
      }
    std::uniform_real_distribution<float> ud(0.25f, 4.0f);
    col_scale.resize(groups * n);
    for (auto& v : col_scale) v = ud(rng) * 1e-3f;
    d_d = DeviceBuffer(rows * n * 4);
    off_d = DeviceBuffer(offsets.size() * 4);
    cs_d = DeviceBuffer(col_scale.size() * 4);
    off_d.upload(offsets.data(), offsets.size() * 4);
    cs_d.upload(col_scale.data(), col_scale.size() * 4);
    g.op = Operand::FP8;
    g.a = a_d.get();
    g.b = b_d.get();
    g.d = d_d.get();
    g.n = n;
    g.k = k;
    g.groups = groups;
    g.expert_offsets = static_cast<const int32_t*>(off_d.get());
    g.max_rows = rows;
    g.small_m_ok = false;
    g.sm_count = device_sm_count();
    FMOE_CUDA(cudaGetDevice(&g.device));
    g.workspace_bytes = cuda::grouped_gemm_workspace_bytes(Operand::FP8, GemmPath::SM90_TMA, groups, g.sm_count);
    ws_d = DeviceBuffer(g.workspace_bytes);
    g.workspace = ws_d.get();
  }

  // fp32 D without scales, then bf16 D with them; every element compared bitwise.
  void run_and_check() {
    g.d_dtype = DType::F32;
    FMOE_CUDA(cudaMemset(d_d.get(), 0xFF, rows * n * 4));
    cuda::run_grouped_gemm(g, GemmPath::SM90_TMA, nullptr);
    FMOE_CUDA(cudaDeviceSynchronize());
    std::vector<float> acc(rows * n);
    d_d.download(acc.data(), acc.size() * 4);

    g.d_dtype = DType::BF16;
    g.d_col_scale = static_cast<const float*>(cs_d.get());
    ASSERT_TRUE(cuda::sm90_dequant_d_applies(g, GemmPath::SM90_TMA));
    FMOE_CUDA(cudaMemset(d_d.get(), 0xFF, rows * n * 4));
    cuda::run_grouped_gemm(g, GemmPath::SM90_TMA, nullptr);
    FMOE_CUDA(cudaDeviceSynchronize());
    std::vector<uint16_t> d16(rows * n);
    d_d.download(d16.data(), d16.size() * 2);
    g.d_col_scale = nullptr;
    g.d_dtype = DType::F32;

    for (size_t e = 0; e + 1 < offsets.size(); ++e)
      for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r)
        for (int64_t c = 0; c < n; ++c) {
          const float a = acc[r * n + c];
          ASSERT_TRUE(std::isfinite(a)) << "fp32 D row " << r << " col " << c << " not written";
          const float want = a * col_scale[e * n + c];
          ASSERT_EQ(d16[r * n + c], float_to_bf16_bits(want))
              << "expert " << e << " row " << r << " col " << c << ": acc " << a << " x " << col_scale[e * n + c]
              << " = " << want << ", got " << bf16_bits_to_float(d16[r * n + c]);
        }
  }
};

TEST(DequantD, StreamGemmFewRows) {
  FMOE_REQUIRE_GPU();
  DequantProblem p({0, 3, 40, 0, 17, 1, 33, 8, 0}, 360, 512);  // n: a partial 128-column block
  ASSERT_TRUE(cuda::stream_gemm_takes(p.g, GemmPath::SM90_TMA)) << "expected the few-rows range";
  p.run_and_check();
}

TEST(DequantD, CutlassManyRows) {
  FMOE_REQUIRE_GPU();
  // 114 rows per expert on average: the large config. k = 2048 keeps the fp32-D reference on the
  // same cooperative 128 x 256 mainloop (k <= 1024 would take the pingpong one); n = 384 ends in
  // a partial 256-column tile.
  DequantProblem p({0, 300, 129, 0, 257, 1}, 384, 2048);
  ASSERT_FALSE(cuda::stream_gemm_takes(p.g, GemmPath::SM90_TMA)) << "expected the large config";
  if (!cuda::sm90_gemm_built(Operand::FP8)) GTEST_SKIP() << "fp8 SM90 GEMMs not built";
  p.run_and_check();
}

// Asked where no epilogue applies it (an fp32 D, 16-bit operands, fp8-block): refused by name,
// before anything is launched.
TEST(DequantD, RefusedOutsideItsPaths) {
  cuda::GroupedGemmArgs g;
  g.op = Operand::FP8;
  g.n = 256;
  g.k = 512;
  g.groups = 4;
  g.max_rows = 4096;
  static const float s[1] = {1.0f};
  g.d_col_scale = s;
  GemmPath path = GemmPath::SM90_TMA;
  const auto message = [&] {
    try {
      cuda::run_grouped_gemm(g, path, nullptr);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  g.d_dtype = DType::F32;  // fp32 D: the finalize applies the scales there
  EXPECT_NE(message().find("d_col_scale"), std::string::npos) << message();
  g.d_dtype = DType::BF16;
  g.op = Operand::BF16;
  EXPECT_NE(message().find("sm90_dequant_d_applies"), std::string::npos) << message();
  g.op = Operand::FP8;
  path = GemmPath::SM90_FP8_BLOCK;
  EXPECT_NE(message().find("sm90_dequant_d_applies"), std::string::npos) << message();
}

}  // namespace
}  // namespace fusedmoe::gputest
