// The nvfp4 (W4A4) quantisation of bf16 activation rows (launch_activation with act_bf16 and quant NVFP4: the pass
// after the 4-bit wgmma GEMM1 + activation) by both of its kernels - the block-per-row one and the flat one over
// 16-blocks, the latter also with its grid capped at 1 and 3 blocks so that small inputs take many grid-stride passes
// and partial last warps - against a host reference of the format's steps (per 16-block sf = e4m3(gs * amax / 6),
// values e2m1(x * gs / sf) * sf, gs = 1 / the row's expert input scale), stored in the natural or the wgmma k order.
// Every stored value is compared bitwise; rows past the device row count (max_rows is larger) must keep their poison.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda/moe_kernels.hpp"
#include "cuda/w4_kperm.cuh"
#include "fusedmoe/codecs.hpp"
#include "gpu/gpu_test_util.hpp"
#include "gpu/w4_act_inputs.hpp"

namespace fusedmoe::gputest {
namespace {

struct Nvfp4RowsCase {
  int64_t rows, max_rows, n;
  cuda::KOrder korder;
};

// Restores the launch rule when a test ends (also on failure).
struct FlatGrid {
  explicit FlatGrid(int cap) { cuda::nvfp4_flat_test_grid(cap); }
  ~FlatGrid() { cuda::nvfp4_flat_test_grid(0); }
};

// The host reference: 16-bit bf16 bits of every output, in natural order.
std::vector<uint16_t> reference(const std::vector<uint16_t>& act, const std::vector<int32_t>& row_expert,
                                const std::vector<float>& in_scale, int64_t rows, int64_t n) {
  std::vector<uint16_t> out(static_cast<size_t>(rows * n));
  for (int64_t r = 0; r < rows; ++r) {
    const float gs = 1.0f / in_scale[row_expert[r]];
    for (int64_t b = 0; b < n / 16; ++b) {
      float v[16], m = 0.0f;
      for (int i = 0; i < 16; ++i) {
        v[i] = bf16_bits_to_float(act[r * n + 16 * b + i]);
        m = std::fmax(m, std::isnan(v[i]) ? 0.0f : std::fabs(v[i]));
      }
      const float sf = round_e4m3(gs * m / 6.0f);
      for (int i = 0; i < 16; ++i) {
        const float q = sf == 0.0f ? 0.0f : e2m1_to_float(float_to_e2m1(v[i] * gs / sf)) * sf;
        out[r * n + 16 * b + i] = float_to_bf16_bits(q);
      }
    }
  }
  return out;
}

void check(const Nvfp4RowsCase& c, int grid) {
  SCOPED_TRACE("rows " + std::to_string(c.rows) + " / " + std::to_string(c.max_rows) + " n " + std::to_string(c.n) +
               (c.korder == cuda::KOrder::W4_WGMMA ? " wgmma order" : " natural order") + " grid " +
               std::to_string(grid));
  const int64_t rows = c.rows, n = c.n;
  std::mt19937 rng(static_cast<uint32_t>(rows * 131 + n));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> act(static_cast<size_t>(c.max_rows * n), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const float gain = std::ldexp(1.0f, static_cast<int>(r % 11) - 5);
    for (int64_t i = 0; i < n; ++i) act[r * n + i] = float_to_bf16_bits(nd(rng) * gain);
  }
  if (rows > 2)
    for (int i = 0; i < 16; ++i) act[2 * n + 16 + i] = 0;  // an all-zero block: scale 0
  if (rows > 4)
    for (int i = 0; i < 16; ++i) act[4 * n + i] = float_to_bf16_bits(1e-30f * (i - 8));  // a scale that underflows e4m3
  const std::vector<float> in_scale = {0.004f, 0.05f, 0.0007f};
  std::vector<int32_t> row_expert(static_cast<size_t>(c.max_rows));
  for (int64_t r = 0; r < c.max_rows; ++r) row_expert[r] = static_cast<int32_t>(rng() % 3);
  const int32_t rows32 = static_cast<int32_t>(rows);

  DeviceBuffer act_d = to_device(act), out_d(act.size() * 2), rows_d = to_device(std::vector<int32_t>{rows32}),
               expert_d = to_device(row_expert), scale_d = to_device(in_scale);
  FMOE_CUDA(cudaMemset(out_d.get(), 0xA5, out_d.bytes()));

  cuda::ActivationParams p;
  p.N = n;
  p.R = 2 * n;
  p.row_expert = static_cast<const int32_t*>(expert_d.get());
  p.rows = static_cast<const int32_t*>(rows_d.get());
  p.out = out_d.get();
  p.op = cuda::Operand::BF16;
  p.korder = c.korder;
  p.quant = cuda::Fp8Quant::NVFP4;
  p.nvfp4_input_scale = static_cast<const float*>(scale_d.get());
  p.act_bf16 = static_cast<const uint16_t*>(act_d.get());
  {
    FlatGrid g(grid);
    cuda::launch_activation(p, c.max_rows, nullptr);
  }
  FMOE_CUDA(cudaGetLastError());
  FMOE_CUDA(cudaDeviceSynchronize());
  std::vector<uint16_t> got(act.size());
  out_d.download(got.data(), got.size() * 2);
  const std::vector<uint16_t> want = reference(act, row_expert, in_scale, rows, n);
  int bad = 0;
  for (int64_t i = 0; i < rows * n; ++i) {
    const uint16_t g = got[static_cast<size_t>(cuda::korder_pos(i, c.korder))];
    if (g != want[i] && ++bad <= 5)
      ADD_FAILURE() << "row " << i / n << " column " << i % n << ": got 0x" << std::hex << g << ", want 0x" << want[i];
  }
  EXPECT_EQ(bad, 0);
  int64_t written_past = 0;
  for (size_t i = static_cast<size_t>(rows * n); i < got.size(); ++i) written_past += got[i] != 0xA5A5u;
  EXPECT_EQ(written_past, 0) << "outputs past the device row count were written";
}

TEST(QuantiseNvfp4Gpu, BothKernelsMatchTheHostReference) {
  FMOE_REQUIRE_GPU();
  const std::vector<Nvfp4RowsCase> cases = {
      {1, 1, 64, cuda::KOrder::W4_WGMMA},      {37, 40, 144, cuda::KOrder::NATURAL},
      {298, 300, 192, cuda::KOrder::W4_WGMMA}, {513, 520, 768, cuda::KOrder::W4_WGMMA},
      {100, 128, 2880, cuda::KOrder::W4_WGMMA}, {64, 64, 2048, cuda::KOrder::NATURAL}};
  for (const Nvfp4RowsCase& c : cases)
    for (int grid : {-1, 1, 3, 0}) check(c, grid);
}

}  // namespace
}  // namespace fusedmoe::gputest
