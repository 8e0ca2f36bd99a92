// The 4-bit wgmma GEMM (src/cuda/w4_wgmma.cu) on its own: d[row][n] = sum_k a[row][k] x
// e2m1(w[e][n][k]) x scale[e][n][k / block] against a float64 sum of the same exact products,
// for MXFP4 and NVFP4, linear and 128x4-swizzled scales, every wgmma width of the two 128-token
// halves of a tile (rows per expert 1, 40, 99, 130, 200, 257 = a full tile + 1, 513), the instance
// pairing a tile's halves in one wgmma (113..192 rows per expert: every second half; more than 192:
// full tiles; 249..288: full tiles on 288-token tiles whose rows 256..287 take a third wgmma), empty
// experts, a weight row count that is not a multiple of the 128-row CTA tile and an odd number of
// 64-wide k stages. The output starts as NaN bytes, so a
// row the kernel skips fails the comparison.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/w4_gemm.hpp"
#include "fusedmoe/codecs.hpp"
#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

struct WgmmaCase {
  Format format;
  bool swizzled;
  std::vector<int32_t> rows;  // per expert
  int64_t n, k;
};

void run_case(const WgmmaCase& c, uint64_t seed) {
  const int E = static_cast<int>(c.rows.size());
  const int bs = c.format == Format::MXFP4 ? 32 : 16;
  const int64_t n = c.n, k = c.k, cols = k / bs;
  std::vector<int32_t> offsets(E + 1, 0);
  for (int e = 0; e < E; ++e) offsets[e + 1] = offsets[e] + c.rows[e];
  const int64_t total = offsets[E];

  std::mt19937_64 rng(seed);
  std::vector<uint8_t> w(static_cast<size_t>(E * n * k / 2));
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  // Scales: e8m0 2^-6 .. 2^6 (MXFP4), e4m3 codes of 2^-4 .. ~2^4 (NVFP4, positive normals).
  std::vector<uint8_t> flat(static_cast<size_t>(E * n * cols));
  for (auto& s : flat) s = c.format == Format::MXFP4 ? static_cast<uint8_t>(121 + rng() % 13) : static_cast<uint8_t>(0x18 + rng() % 0x40);
  std::vector<uint16_t> a(static_cast<size_t>(total * k));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& x : a) x = float_to_bf16_bits(nd(rng));

  std::vector<uint8_t> scales;
  if (c.swizzled) {
    const size_t per = swizzled_scale_bytes(n, cols);
    scales.assign(per * E, 0);
    for (int e = 0; e < E; ++e) swizzle_scales_128x4(flat.data() + e * n * cols, n, cols, scales.data() + e * per);
  } else {
    scales = flat;
  }

  DeviceBuffer dw(w.size()), ds(scales.size()), da(a.size() * 2 + 16), dd(static_cast<size_t>(total * n * 4) + 4),
      doff(offsets.size() * 4);
  dw.upload(w.data(), w.size());
  ds.upload(scales.data(), scales.size());
  // The kernel takes its operand in its k order (w4_kperm.cuh); the reference below uses a as is.
  if (!a.empty()) da.upload(korder_rows(a, cuda::KOrder::W4_WGMMA).data(), a.size() * 2);
  doff.upload(offsets.data(), offsets.size() * 4);
  FMOE_CUDA(cudaMemset(dd.get(), 0xFF, static_cast<size_t>(total * n * 4) + 4));

  cuda::W4Weights wt;
  wt.format = c.format;
  wt.swizzled = c.swizzled;
  wt.w = static_cast<const uint8_t*>(dw.get());
  wt.scale = ds.get();
  wt.n = n;
  wt.k = k;
  ASSERT_TRUE(cuda::w4_wgmma_shape_ok(wt));
  cuda::w4_wgmma_grouped_gemm(wt, da.get(), static_cast<float*>(dd.get()), E, static_cast<const int32_t*>(doff.get()),
                              total, nullptr);
  FMOE_CUDA(cudaDeviceSynchronize());
  std::vector<float> d(static_cast<size_t>(total * n));
  dd.download(d.data(), d.size() * 4);

  int bad = 0;
  for (int e = 0; e < E; ++e)
    for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r)
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0.0, mag = 0.0;
        for (int64_t kk = 0; kk < k; ++kk) {
          const uint8_t byte = w[static_cast<size_t>((e * n + j) * (k / 2) + kk / 2)];
          const float v = e2m1_to_float(kk % 2 ? byte >> 4 : byte & 0xF);
          const uint8_t sc = flat[static_cast<size_t>((e * n + j) * cols + kk / bs)];
          const double s = c.format == Format::MXFP4 ? e8m0_to_float(sc) : e4m3_to_float(sc);
          const double term = static_cast<double>(bf16_bits_to_float(a[static_cast<size_t>(r * k + kk)])) * v * s;
          ref += term;
          mag += std::fabs(term);
        }
        const double got = d[static_cast<size_t>(r * n + j)];
        // fp32 accumulation of exact products: a few ulps of the magnitude sum.
        if (!(std::fabs(got - ref) <= 1e-5 * mag + 1e-30) && ++bad <= 5)
          ADD_FAILURE() << "expert " << e << " row " << r << " col " << j << ": got " << got << ", want " << ref;
      }
  EXPECT_EQ(bad, 0);
}

// The kernel instance a tile list takes (w4_wgmma_pair_rule on its rows and experts, the fp32-D GEMM at k).
cuda::W4WgmmaPair pair_of(const std::vector<int32_t>& rows, int64_t k = 320) {
  int64_t total = 0;
  for (int32_t r : rows) total += r;
  return cuda::w4_wgmma_pair_rule(total, static_cast<int>(rows.size()), k, false);
}

TEST(W4WgmmaGpu, MatchesFloat64) {
  FMOE_REQUIRE_GPU();
  // The cases below cover the five instances (FULL on both sides of WIDE: 198 and 317 rows per expert; FINE
  // only from k = kW4FineMinK, ALL below it).
  EXPECT_EQ(pair_of({65, 64, 0, 33, 32, 129}), cuda::W4WgmmaPair::NONE);
  EXPECT_EQ(pair_of({130, 0, 1, 257, 99, 40, 200, 513, 160}), cuda::W4WgmmaPair::ALL);
  const std::vector<int32_t> fine{130, 0, 1, 257, 99, 40, 200, 513, 160, 140, 150};  // 153 rows per expert
  EXPECT_EQ(pair_of(fine, cuda::kW4FineMinK - 64), cuda::W4WgmmaPair::ALL);
  EXPECT_EQ(pair_of(fine, cuda::kW4FineMinK), cuda::W4WgmmaPair::FINE);
  EXPECT_EQ(pair_of({170, 190, 257, 180, 140, 200}, 4096), cuda::W4WgmmaPair::ALL);  // 189: ALL at any k
  EXPECT_EQ(pair_of({513, 300, 0, 256, 520}), cuda::W4WgmmaPair::FULL);
  EXPECT_EQ(pair_of({256, 300, 200, 0, 513, 250}), cuda::W4WgmmaPair::WIDE);
  EXPECT_EQ(pair_of({270, 288, 289, 256, 257, 240}), cuda::W4WgmmaPair::WIDE);
  EXPECT_EQ(pair_of({240, 250, 0, 260, 240}), cuda::W4WgmmaPair::FULL);  // 198 rows per expert
  EXPECT_EQ(pair_of({520, 540, 560, 530, 600}), cuda::W4WgmmaPair::FULL);  // 550
  EXPECT_EQ(pair_of({400, 480, 500, 450}), cuda::W4WgmmaPair::FULL);       // 457
  uint64_t seed = 1;
  for (Format f : {Format::MXFP4, Format::NVFP4})
    for (bool sw : {false, true}) {
      SCOPED_TRACE(std::string(f == Format::MXFP4 ? "mxfp4" : "nvfp4") + (sw ? " swizzled" : " linear"));
      // n = 200: a partial 128-row CTA tile; k = 320: 5 stages. 155 rows per expert: the instance pairing
      // every second half (w4_wgmma.cu pair_mode: n160 / n192 / n256 wgmmas).
      run_case({f, sw, {130, 0, 1, 257, 99, 40, 200, 513, 160}, 200, 320}, seed++);
      // k = 2048 (32 stages): 153 rows per expert take the instance with second halves of 8 .. 32 rows (130 / 140 /
      // 150 / 160: m64n136 / n144 / n152 / n160; 200 and 257's first tile on (128, 128), small tiles on (128, 0)).
      run_case({f, sw, fine, 200, cuda::kW4FineMinK}, seed++);
      run_case({f, sw, {65, 64, 0, 33, 32, 129}, 136, 192}, seed++);
      // n odd: a weight row count with no even split.
      run_case({f, sw, {70, 3, 131}, 131, 128}, seed++);
      // 317 rows per expert: the paired instance (full tiles on one m64n256k16; w4_wgmma_pair_rule), its
      // other widths too (300 = a full tile + 44, 513 = two full tiles + 1).
      run_case({f, sw, {513, 300, 0, 256, 520}, 200, 320}, seed++);
      // 249..288 rows per expert: 288-token tiles (rows 256..287 on a third m64n32k16; 289 and 300 = a
      // 288-token tile + 1 / + 12, 513 = 288 + 225) and the instance's other widths.
      run_case({f, sw, {256, 300, 200, 0, 513, 250}, 200, 320}, seed++);
      run_case({f, sw, {270, 288, 289, 256, 257, 240}, 131, 128}, seed++);
    }
}

TEST(W4WgmmaGpu, ShapesItCannotTake) {
  cuda::W4Weights w;
  w.format = Format::MXFP4;
  w.n = 128;
  w.k = 96;  // not a multiple of the 64-wide k stage
  alignas(16) static uint8_t buf[16];
  w.w = buf;
  w.scale = buf;
  EXPECT_FALSE(cuda::w4_wgmma_shape_ok(w));
  w.k = 128;
  EXPECT_TRUE(cuda::w4_wgmma_shape_ok(w));
  w.format = Format::W4A8_INT4;  // group-128 int4 scales multiply the sums, not the operand
  EXPECT_FALSE(cuda::w4_wgmma_shape_ok(w));
}

}  // namespace
}  // namespace fusedmoe::gputest
