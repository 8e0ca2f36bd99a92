// The W4A8 wgmma GEMM (src/cuda/w4a8_wgmma.cu) on its own: d[row][n] = sum over 128-wide groups
// g of scale[e][n][g] x sum_{k in g} e4m3(a[row][k]) x q[e][n][k], against a float64 sum, for
// two's complement and q + 8 (uint4b8) nibbles, every wgmma width (rows per expert across the
// 32 / 64 / 96 / 128 / 160 edges, a full tile + 1, several tiles), empty experts, a weight row
// count that is not a multiple of the 128-row CTA tile, one stage and more stages than the copy
// ring holds, and group scales of both signs from 2^-30 to 2^30 (applied in fp32 to each group's
// sum, so no range limit). The output starts as NaN bytes: a row the kernel skips fails.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda/w4_gemm.hpp"
#include "fusedmoe/codecs.hpp"
#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

struct A8Case {
  bool uint4b8;
  bool small_ints;  // activations -3..3: every group sum is exact in the tensor cores
  std::vector<int32_t> rows;  // per expert
  int64_t n, k;
};

void run_case(const A8Case& c, uint64_t seed) {
  const int E = static_cast<int>(c.rows.size());
  const int64_t n = c.n, k = c.k, groups = k / 128;
  std::vector<int32_t> offsets(E + 1, 0);
  for (int e = 0; e < E; ++e) offsets[e + 1] = offsets[e] + c.rows[e];
  const int64_t total = offsets[E];

  std::mt19937_64 rng(seed);
  std::vector<uint8_t> w(static_cast<size_t>(E * n * k / 2));
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  std::vector<uint16_t> scale(static_cast<size_t>(E * n * groups));
  for (auto& s : scale) {
    const float mant = 1.0f + static_cast<float>(rng() % 128) / 128.0f;
    const int ex = static_cast<int>(rng() % 61) - 30;
    s = float_to_bf16_bits((rng() % 2 ? -1.0f : 1.0f) * std::ldexp(mant, ex));
  }
  std::vector<uint8_t> a(static_cast<size_t>(total * k));
  for (auto& x : a) {
    x = c.small_ints ? float_to_e4m3(static_cast<float>(static_cast<int>(rng() % 7) - 3)) : static_cast<uint8_t>(rng());
    if ((x & 0x7F) == 0x7F) x ^= 1;  // no NaN codes
  }

  DeviceBuffer dw(w.size()), ds(scale.size() * 2), da(a.size() + 16), dd(static_cast<size_t>(total * n * 4) + 4),
      doff(offsets.size() * 4);
  dw.upload(w.data(), w.size());
  ds.upload(scale.data(), scale.size() * 2);
  if (!a.empty()) da.upload(a.data(), a.size());
  doff.upload(offsets.data(), offsets.size() * 4);
  FMOE_CUDA(cudaMemset(dd.get(), 0xFF, static_cast<size_t>(total * n * 4) + 4));

  cuda::W4Weights wt;
  wt.format = Format::W4A8_INT4;
  wt.uint4b8 = c.uint4b8;
  wt.w = static_cast<const uint8_t*>(dw.get());
  wt.scale = ds.get();
  wt.n = n;
  wt.k = k;
  ASSERT_TRUE(cuda::w4a8_wgmma_shape_ok(wt));
  cuda::w4a8_wgmma_grouped_gemm(wt, static_cast<const uint8_t*>(da.get()), static_cast<float*>(dd.get()), E,
                                static_cast<const int32_t*>(doff.get()), total, nullptr);
  FMOE_CUDA(cudaDeviceSynchronize());
  std::vector<float> d(static_cast<size_t>(total * n));
  dd.download(d.data(), d.size() * 4);

  int bad = 0;
  for (int e = 0; e < E; ++e)
    for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r)
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0.0, mag = 0.0;
        for (int64_t g = 0; g < groups; ++g) {
          const double s = bf16_bits_to_float(scale[static_cast<size_t>((e * n + j) * groups + g)]);
          for (int64_t kk = 128 * g; kk < 128 * (g + 1); ++kk) {
            const uint8_t byte = w[static_cast<size_t>((e * n + j) * (k / 2) + kk / 2)];
            int q = kk % 2 ? byte >> 4 : byte & 0xF;
            q = c.uint4b8 ? q - 8 : (q >= 8 ? q - 16 : q);
            const double term = static_cast<double>(e4m3_to_float(a[static_cast<size_t>(r * k + kk)])) * q * s;
            ref += term;
            mag += std::fabs(term);
          }
        }
        const double got = d[static_cast<size_t>(r * n + j)];
        // Exact products. The fp8 tensor cores add a k32 step's products aligned to the largest
        // with a short fraction (truncated: the reason for the per-group promotion; measured up to
        // ~5e-4 of the magnitude sum on full-range e4m3 activations), so 2^-8 there. With
        // activations -3..3 every group sum is a small integer (< 2^12), exact, and only the fp32
        // scale / add remain: 1e-5 - one wrong weight moves a sum by far more.
        const double tol = c.small_ints ? 1e-5 : 0x1p-8;
        if (!(std::fabs(got - ref) <= tol * mag + 1e-30) && ++bad <= 5)
          ADD_FAILURE() << "expert " << e << " row " << r << " col " << j << ": got " << got << ", want " << ref;
      }
  EXPECT_EQ(bad, 0);
}

TEST(W4a8WgmmaGpu, MatchesFloat64) {
  FMOE_REQUIRE_GPU();
  uint64_t seed = 1;
  for (bool small : {true, false})
    for (bool u : {false, true}) {
      SCOPED_TRACE(std::string(u ? "uint4b8" : "two's complement") + (small ? ", activations -3..3" : ", any e4m3"));
      // n = 200: a partial 128-row CTA tile; k = 384: 3 stages.
      run_case({u, small, {130, 0, 1, 161, 97, 40, 160, 321, 33, 64, 96, 128}, 200, 384}, seed++);
      // k = 1024: 8 stages, more than the 5-buffer ring; k = 128: one stage.
      run_case({u, small, {65, 32, 0, 129, 5}, 136, 1024}, seed++);
      run_case({u, small, {31, 200}, 256, 128}, seed++);
    }
}

TEST(W4a8WgmmaGpu, ShapesItCannotTake) {
  cuda::W4Weights w;
  w.format = Format::W4A8_INT4;
  w.n = 128;
  w.k = 192;  // not a multiple of the 128-wide group
  alignas(16) static uint8_t buf[32];
  w.w = buf;
  w.scale = buf;
  EXPECT_FALSE(cuda::w4a8_wgmma_shape_ok(w));
  w.k = 256;
  EXPECT_TRUE(cuda::w4a8_wgmma_shape_ok(w));
  w.scale = buf + 1;  // bf16 scales must be 2-byte aligned
  EXPECT_FALSE(cuda::w4a8_wgmma_shape_ok(w));
  w.scale = buf;
  w.w = buf + 8;  // 16-byte cp.async copies
  EXPECT_FALSE(cuda::w4a8_wgmma_shape_ok(w));
  w.w = buf;
  w.format = Format::MXFP4;
  EXPECT_FALSE(cuda::w4a8_wgmma_shape_ok(w));
}

}  // namespace
}  // namespace fusedmoe::gputest
