// The 4-bit mma GEMM (src/cuda/w4_gemm.cu) with several 16-row groups per warp (the kMulti
// instances: one cp.async ring across the groups) against the same kernel with one group: every
// output bitwise equal (the same rows, k order and fp32 sums), for MXFP4 and NVFP4 with linear and
// 128x4-swizzled scales and W4A8, group counts that leave the last warps fewer groups (n not a
// multiple of the grid's rows), a k with a partial last stage and one with an odd stage count,
// empty experts and an expert past one 8-token tile (the token loop around the group ring). The
// output starts as NaN bytes, so a value the kernel skips fails. One group is checked against a
// float64 sum of the exact products too, so that the comparison has a verified side.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/w4_gemm.hpp"
#include "fusedmoe/codecs.hpp"
#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

struct GroupsCase {
  Format format;
  bool swizzled;
  int64_t n, k;
};

std::string case_name(const GroupsCase& c) {
  return std::string(c.format == Format::MXFP4 ? "mxfp4" : c.format == Format::NVFP4 ? "nvfp4" : "w4a8") +
         (c.swizzled ? "_swizzled" : "") + "_n" + std::to_string(c.n) + "_k" + std::to_string(c.k);
}

class W4MmaGroups : public ::testing::TestWithParam<GroupsCase> {};

TEST_P(W4MmaGroups, BitwiseEqualToOneGroup) {
  FMOE_REQUIRE_GPU();
  const GroupsCase c = GetParam();
  const std::vector<int32_t> rows = {1, 0, 3, 12, 2, 5};  // at most 8 expected rows: one 8-token tile
  const int E = static_cast<int>(rows.size());
  const int64_t n = c.n, k = c.k;
  const bool int4 = c.format == Format::W4A8_INT4;
  const int bs = c.format == Format::MXFP4 ? 32 : (c.format == Format::NVFP4 ? 16 : 128);
  const int64_t cols = k / bs;
  std::vector<int32_t> offsets(E + 1, 0);
  for (int e = 0; e < E; ++e) offsets[e + 1] = offsets[e] + rows[e];
  const int64_t total = offsets[E];

  std::mt19937_64 rng(static_cast<uint64_t>(n * 131 + k * 7 + static_cast<int>(c.format) * 3 + c.swizzled));
  std::vector<uint8_t> w(static_cast<size_t>(E * n * k / 2));
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  std::normal_distribution<float> nd(0.0f, 1.0f);
  // Scales: e8m0 2^-6 .. 2^6, e4m3 codes of 2^-4 .. ~2^4, or bf16 group scales (W4A8).
  std::vector<uint8_t> flat(static_cast<size_t>(E * n * cols * (int4 ? 2 : 1)));
  if (int4) {
    for (int64_t i = 0; i < E * n * cols; ++i) {
      const uint16_t b = float_to_bf16_bits(0.01f + 0.05f * std::fabs(nd(rng)));
      std::memcpy(&flat[static_cast<size_t>(2 * i)], &b, 2);
    }
  } else {
    for (auto& s : flat)
      s = c.format == Format::MXFP4 ? static_cast<uint8_t>(121 + rng() % 13) : static_cast<uint8_t>(0x18 + rng() % 0x40);
  }
  std::vector<uint8_t> scales = flat;
  if (c.swizzled) {
    const size_t per = swizzled_scale_bytes(n, cols);
    scales.assign(per * E, 0);
    for (int e = 0; e < E; ++e) swizzle_scales_128x4(flat.data() + e * n * cols, n, cols, scales.data() + e * per);
  }
  // Activations: bf16 as is (MXFP4 / NVFP4); W4A8 fp16 values in the kernel's k order.
  std::vector<uint16_t> a(static_cast<size_t>(total * k));
  for (auto& x : a) x = int4 ? float_to_fp16_bits(nd(rng)) : float_to_bf16_bits(nd(rng));
  const std::vector<uint16_t> a_dev = int4 ? korder_rows(a, cuda::KOrder::W4_MMA) : a;

  DeviceBuffer dw(w.size()), ds(scales.size()), da(a.size() * 2 + 16), doff(offsets.size() * 4);
  dw.upload(w.data(), w.size());
  ds.upload(scales.data(), scales.size());
  da.upload(a_dev.data(), a_dev.size() * 2);
  doff.upload(offsets.data(), offsets.size() * 4);
  cuda::W4Weights wt;
  wt.format = c.format;
  wt.swizzled = c.swizzled;
  wt.w = static_cast<const uint8_t*>(dw.get());
  wt.scale = ds.get();
  wt.n = n;
  wt.k = k;
  const char* why = nullptr;
  ASSERT_TRUE(cuda::w4_shape_ok(wt, &why)) << why;

  const size_t out_bytes = static_cast<size_t>(total * n * 4);
  auto run = [&](int groups_asked, int* ran) {
    DeviceBuffer dd(out_bytes + 4);
    FMOE_CUDA(cudaMemset(dd.get(), 0xFF, out_bytes + 4));
    *ran = cuda::w4_mma_grouped_gemm(wt, da.get(), static_cast<float*>(dd.get()), E,
                                     static_cast<const int32_t*>(doff.get()), total, nullptr, groups_asked);
    FMOE_CUDA(cudaDeviceSynchronize());
    std::vector<uint32_t> d(static_cast<size_t>(total * n));
    dd.download(d.data(), out_bytes);
    return d;
  };
  int ran = 0;
  const std::vector<uint32_t> one = run(1, &ran);
  ASSERT_EQ(ran, 1);

  // The one-group run against float64 (every row, every 7th column).
  int bad = 0;
  for (int e = 0; e < E; ++e)
    for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r)
      for (int64_t j = 0; j < n; j += 7) {
        double ref = 0.0, mag = 0.0;
        for (int64_t kk = 0; kk < k; ++kk) {
          const uint8_t byte = w[static_cast<size_t>((e * n + j) * (k / 2) + kk / 2)];
          const int code = kk % 2 ? byte >> 4 : byte & 0xF;
          const size_t si = static_cast<size_t>((e * n + j) * cols + kk / bs);
          double v, s;
          if (int4) {
            v = (code & 8) ? code - 16 : code;
            uint16_t sb;
            std::memcpy(&sb, &flat[2 * si], 2);
            s = bf16_bits_to_float(sb);
          } else {
            v = e2m1_to_float(static_cast<uint8_t>(code));
            s = c.format == Format::MXFP4 ? e8m0_to_float(flat[si]) : e4m3_to_float(flat[si]);
          }
          const uint16_t ab = a[static_cast<size_t>(r * k + kk)];
          const double x = int4 ? fp16_bits_to_float(ab) : bf16_bits_to_float(ab);
          ref += x * v * s;
          mag += std::fabs(x * v * s);
        }
        float got;
        std::memcpy(&got, &one[static_cast<size_t>(r * n + j)], 4);
        if (!(std::fabs(got - ref) <= 1e-5 * mag + 1e-30) && ++bad <= 5)
          ADD_FAILURE() << "one group: expert " << e << " row " << r << " col " << j << ": got " << got << ", want " << ref;
      }
  ASSERT_EQ(bad, 0);

  for (const int groups : {2, 3, 4, 8}) {
    SCOPED_TRACE("row groups " + std::to_string(groups));
    const std::vector<uint32_t> got = run(groups, &ran);
    // Swizzled scales take several groups only over whole 128-row tiles of the grid.
    const int64_t blocks = (n + 64 * groups - 1) / (64 * groups);
    const int want = c.swizzled && (blocks * 64) % 128 != 0 ? 1 : groups;
    EXPECT_EQ(ran, want);
    int diff = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != one[i] && ++diff <= 5)
        ADD_FAILURE() << "row " << i / n << " col " << i % n << ": " << std::hex << got[i] << " vs one group's " << one[i];
    EXPECT_EQ(diff, 0);
  }
}

// n = 2048 / 768 / 720 (45 16-row groups: the last warps get fewer groups); k = 768 (3 stages of
// 256), 2880 (a partial 12th stage), 2048.
INSTANTIATE_TEST_SUITE_P(Cases, W4MmaGroups,
                         ::testing::Values(GroupsCase{Format::MXFP4, false, 2048, 768},
                                           GroupsCase{Format::MXFP4, false, 720, 2880},
                                           GroupsCase{Format::MXFP4, true, 768, 2048},
                                           GroupsCase{Format::MXFP4, true, 720, 2880},
                                           GroupsCase{Format::NVFP4, false, 720, 768},
                                           GroupsCase{Format::NVFP4, true, 2048, 2880},
                                           GroupsCase{Format::W4A8_INT4, false, 2048, 768},
                                           GroupsCase{Format::W4A8_INT4, false, 720, 2048}),
                         [](const auto& info) { return case_name(info.param); });

}  // namespace
}  // namespace fusedmoe::gputest
