// The quantisers of bf16 activation rows (the activation stage after the fused fp8-channel /
// fp8-block GEMM1 + activation: launch_activation with ActivationParams::act_bf16), called
// directly, against a host reference of the same steps: per row (ROW) or per 128-wide group
// (BLOCK, fp32 and power-of-two scales) s = max(amax, 1e-10) / 448, codes e4m3(v / s). Both the
// warp-per-row kernels (>= 512 rows of <= 2048 values for ROW, <= 1024 for BLOCK) and the
// block-per-row ones (fewer rows, longer rows) are covered, including a row width that is not a
// multiple of a warp's 256 values and an expert without rows (BLOCK's scale layout is per expert).
// Outputs are poisoned first; every code and scale is compared bitwise.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda/moe_kernels.hpp"
#include "fusedmoe/codecs.hpp"
#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

struct RowsCase {
  cuda::Fp8Quant quant;
  int64_t rows, n;
  bool ue8m0;
};

std::string name(const RowsCase& c) {
  return std::string(c.quant == cuda::Fp8Quant::ROW ? "row" : c.ue8m0 ? "block_ue8m0" : "block") + " rows " +
         std::to_string(c.rows) + " n " + std::to_string(c.n);
}

void check_rows(const RowsCase& c) {
  SCOPED_TRACE(name(c));
  const int64_t rows = c.rows, n = c.n, groups = n / 128;
  std::mt19937 rng(static_cast<uint32_t>(rows * 7 + n));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> act(rows * n);
  for (int64_t r = 0; r < rows; ++r) {
    const float row_gain = std::ldexp(1.0f, static_cast<int>(r % 13) - 6);  // rows of different ranges
    for (int64_t i = 0; i < n; ++i) act[r * n + i] = float_to_bf16_bits(nd(rng) * row_gain);
  }
  if (rows > 3)
    for (int64_t i = 0; i < n; ++i) act[3 * n + i] = 0;  // an all-zero row: the 1e-10 floor
  // Experts: rows [0, 40%), none, [40%, rows).
  const int32_t split = static_cast<int32_t>(rows * 2 / 5);
  const std::vector<int32_t> offsets = {0, split, split, static_cast<int32_t>(rows)};
  std::vector<int32_t> row_expert(rows);
  for (int64_t r = 0; r < rows; ++r) row_expert[r] = r < split ? 0 : 2;
  const int32_t rows32 = static_cast<int32_t>(rows);

  DeviceBuffer act_d(act.size() * 2), out_d(rows * n), scale_d(rows * std::max<int64_t>(groups, 1) * 4),
      rows_d(4), off_d(offsets.size() * 4), expert_d(rows * 4);
  act_d.upload(act.data(), act.size() * 2);
  rows_d.upload(&rows32, 4);
  off_d.upload(offsets.data(), offsets.size() * 4);
  expert_d.upload(row_expert.data(), row_expert.size() * 4);
  FMOE_CUDA(cudaMemset(out_d.get(), 0x7F, rows * n));
  FMOE_CUDA(cudaMemset(scale_d.get(), 0xFF, scale_d.bytes()));

  cuda::ActivationParams p;
  p.N = n;
  p.R = 2 * n;
  p.rows = static_cast<const int32_t*>(rows_d.get());
  p.row_expert = static_cast<const int32_t*>(expert_d.get());
  p.act_bf16 = static_cast<const uint16_t*>(act_d.get());
  p.out = out_d.get();
  p.op = cuda::Operand::FP8;
  p.quant = c.quant;
  p.act_dtype = DType::BF16;
  if (c.quant == cuda::Fp8Quant::ROW) {
    p.row_scale = static_cast<float*>(scale_d.get());
  } else {
    p.block = {static_cast<float*>(scale_d.get()), static_cast<const int32_t*>(expert_d.get()),
               static_cast<const int32_t*>(off_d.get()), c.ue8m0};
  }
  cuda::launch_activation(p, rows, nullptr);
  FMOE_CUDA(cudaDeviceSynchronize());
  std::vector<uint8_t> out(rows * n);
  std::vector<float> scale(scale_d.bytes() / 4);
  out_d.download(out.data(), out.size());
  scale_d.download(scale.data(), scale.size() * 4);

  const int64_t width = c.quant == cuda::Fp8Quant::ROW ? n : 128;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c0 = 0; c0 < n; c0 += width) {
      float amax = 0.0f;
      for (int64_t i = c0; i < c0 + width; ++i) amax = std::max(amax, std::fabs(bf16_bits_to_float(act[r * n + i])));
      float s = std::max(amax, 1e-10f) / 448.0f;
      if (c.ue8m0) s = round_up_pow2(s);
      int64_t at = r;
      if (c.quant == cuda::Fp8Quant::BLOCK) {
        const int32_t e = row_expert[r];
        const int64_t row0 = offsets[e], rows_e = offsets[e + 1] - row0;
        at = row0 * groups + (c0 / 128) * rows_e + (r - row0);
      }
      ASSERT_EQ(scale[at], s) << "row " << r << " columns from " << c0;
      for (int64_t i = c0; i < c0 + width; ++i)
        ASSERT_EQ(out[r * n + i], float_to_e4m3(bf16_bits_to_float(act[r * n + i]) / s)) << "row " << r << " col " << i;
    }
}

TEST(QuantiseRowsGpu, RowScalesMatchHost) {
  FMOE_REQUIRE_GPU();
  for (int64_t n : {256, 768, 1000, 2048, 4096})
    for (int64_t rows : {100, 700}) check_rows({cuda::Fp8Quant::ROW, rows, n, false});
}

TEST(QuantiseRowsGpu, BlockScalesMatchHost) {
  FMOE_REQUIRE_GPU();
  for (bool ue8m0 : {false, true})
    for (int64_t n : {256, 768, 2048, 4096})
      for (int64_t rows : {100, 700}) check_rows({cuda::Fp8Quant::BLOCK, rows, n, ue8m0});
}

}  // namespace
}  // namespace fusedmoe::gputest
