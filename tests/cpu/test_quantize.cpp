// Quantiser tests: straightforward re-derivations of docs/LAYER_FILE.md's formulas on small
// inputs, hand-checked blocks, error bounds, and ragged block edges.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "fusedmoe/codecs.hpp"
#include "fusedmoe/error.hpp"
#include "fusedmoe/quantize.hpp"

namespace fusedmoe {
namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

float amax(const float* x, int64_t n) {
  float m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

// Halfway between e4m3 code and code + 1 (positive codes).
float e4m3_midpoint(int code) {
  return (e4m3_to_float(static_cast<uint8_t>(code)) + e4m3_to_float(static_cast<uint8_t>(code + 1))) / 2;
}

// Worst e4m3 rounding error of x / s, in x's units: half an ulp (2^-4 relative) or, below the
// normal range, half the smallest subnormal (2^-10).
float e4m3_err_bound(float x, float s) { return std::max(std::fabs(x) * 0x1p-4f, 0x1p-10f * s) * 1.0001f; }

// Every e4m3 midpoint (normal range, both signs) times 15, with 15 * 448 as amax so that s = 15
// exactly: x / s lands exactly on the tie and must round to the even code. x * (1 / s) misses
// many of them (1/15 is inexact, and for 15 the error survives the rounding; for 3 it would not),
// so this pins the operation order the oracle uses.
constexpr float kTieScale = 15.0f;

std::vector<float> e4m3_ties(std::vector<uint8_t>* want) {
  std::vector<float> x = {kTieScale * 448.0f};
  want->assign(1, 0x7e);
  for (int c = 0x08; c < 0x7e; ++c) {
    const float mid = e4m3_midpoint(c);
    const uint8_t even = static_cast<uint8_t>((c & 1) ? c + 1 : c);
    x.push_back(kTieScale * mid);
    want->push_back(even);
    x.push_back(-kTieScale * mid);
    want->push_back(static_cast<uint8_t>(0x80 | even));
  }
  return x;
}

TEST(QuantFp8Ties, DividesAndRoundsHalfToEven) {
  std::vector<uint8_t> want;
  const std::vector<float> x = e4m3_ties(&want);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(x.size());
  // Per tensor.
  const float s = fp8_tensor_scale(x.data(), n);
  ASSERT_EQ(s, kTieScale);
  quantize_fp8_with_scale(x.data(), n, s, q.data());
  EXPECT_EQ(q, want);
  // Per row (one row) and per token group (one group).
  float sr = 0;
  quantize_fp8_per_row(x.data(), 1, n, q.data(), &sr);
  EXPECT_EQ(sr, kTieScale);
  EXPECT_EQ(q, want);
  quantize_fp8_per_token_group(x.data(), 1, n, 1024, false, q.data(), &sr);
  EXPECT_EQ(sr, kTieScale);
  EXPECT_EQ(q, want);
  // Block weight: one row, cols < 128 per block -> lay the values out as a 1 x n matrix in
  // blocks of 128 columns, each block holding the amax.
  std::vector<float> w;
  std::vector<uint8_t> wq;
  for (size_t i = 0; i < x.size(); ++i) {
    if (w.size() % 128 == 0) {
      w.push_back(x[0]);
      wq.push_back(want[0]);
    }
    if (i == 0) continue;
    w.push_back(x[i]);
    wq.push_back(want[i]);
  }
  const int64_t cols = static_cast<int64_t>(w.size());
  std::vector<uint8_t> bq(w.size());
  std::vector<float> bs(static_cast<size_t>((cols + 127) / 128));
  quantize_fp8_block_weight(w.data(), 1, cols, bq.data(), bs.data());
  for (float v : bs) EXPECT_EQ(v, kTieScale);
  EXPECT_EQ(bq, wq);
}

// ---- per tensor ----

TEST(QuantFp8Tensor, ScaleAndCodes) {
  const std::vector<float> x = {0.5f, -3.0f, 896.0f, -0.001f, 7.0f, 0.0f};
  const float s = fp8_tensor_scale(x.data(), 6);
  EXPECT_EQ(s, 896.0f / 448.0f);
  std::vector<uint8_t> q(6);
  quantize_fp8_with_scale(x.data(), 6, s, q.data());
  EXPECT_EQ(q[2], 0x7e);                            // amax -> 448
  EXPECT_EQ(q[0], float_to_e4m3(0.25f));
  EXPECT_EQ(e4m3_to_float(q[1]), -1.5f);
  EXPECT_EQ(q[5], 0x00);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(q[i], float_to_e4m3(x[i] / s));
}

TEST(QuantFp8Tensor, StaticScaleSaturatesAndBound) {
  const auto x = randn(4096, 1, 3.0f);
  const float s = 0.01f;  // static: many values exceed 448 * s and clip
  std::vector<uint8_t> q(x.size());
  quantize_fp8_with_scale(x.data(), static_cast<int64_t>(x.size()), s, q.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const float v = x[i] / s;
    const float want = std::min(448.0f, std::max(-448.0f, v));
    EXPECT_EQ(q[i], float_to_e4m3(want));
    if (std::fabs(v) <= 448.0f) {
      EXPECT_LE(std::fabs(e4m3_to_float(q[i]) * s - x[i]), e4m3_err_bound(x[i], s));
    }
  }
  const auto y = randn(4096, 2);
  const float sy = fp8_tensor_scale(y.data(), 4096);
  quantize_fp8_with_scale(y.data(), 4096, sy, q.data());
  for (int i = 0; i < 4096; ++i) {
    EXPECT_LE(std::fabs(e4m3_to_float(q[i]) * sy - y[i]), e4m3_err_bound(y[i], sy));
  }
}

TEST(QuantFp8Tensor, AllZero) {
  const std::vector<float> x = {0.0f, -0.0f, 0.0f};
  const float s = fp8_tensor_scale(x.data(), 3);
  EXPECT_EQ(s, 0.0f);
  std::vector<uint8_t> q(3, 0x55);
  quantize_fp8_with_scale(x.data(), 3, s, q.data());
  EXPECT_EQ(q[0], 0x00);
  EXPECT_EQ(q[1], 0x80);  // signed zero, never NaN
  EXPECT_EQ(fp8_tensor_scale(x.data(), 0), 0.0f);
}

// ---- per row ----

TEST(QuantFp8PerRow, MatchesFormula) {
  const int64_t rows = 5, cols = 37;
  auto x = randn(rows * cols, 3);
  for (int64_t c = 0; c < cols; ++c) x[2 * cols + c] = 0.0f;  // a zero row
  x[4 * cols + 3] = -1000.0f;
  std::vector<uint8_t> q(rows * cols);
  std::vector<float> s(rows);
  quantize_fp8_per_row(x.data(), rows, cols, q.data(), s.data());
  for (int64_t r = 0; r < rows; ++r) {
    const float want = std::max(amax(&x[r * cols], cols), 1e-10f) / 448.0f;
    EXPECT_EQ(s[r], want) << r;
    for (int64_t c = 0; c < cols; ++c) {
      const float v = x[r * cols + c];
      EXPECT_EQ(q[r * cols + c], float_to_e4m3(v / want));
      EXPECT_LE(std::fabs(e4m3_to_float(q[r * cols + c]) * s[r] - v), e4m3_err_bound(v, s[r]));
    }
  }
  EXPECT_EQ(s[2], 1e-10f / 448.0f);
  EXPECT_EQ(q[4 * cols + 3], 0xfe);
}

// ---- per token group ----

TEST(QuantFp8Group, RaggedLastGroup) {
  const int64_t rows = 3, cols = 300, group = 128;  // groups of 128, 128, 44
  auto x = randn(rows * cols, 4);
  x[1 * cols + 290] = 50.0f;  // inside the ragged group
  std::vector<uint8_t> q(rows * cols);
  std::vector<float> s(rows * 3);
  quantize_fp8_per_token_group(x.data(), rows, cols, group, false, q.data(), s.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < 3; ++g) {
      const int64_t c0 = g * group, n = std::min(group, cols - c0);
      const float want = std::max(amax(&x[r * cols + c0], n), 1e-10f) / 448.0f;
      EXPECT_EQ(s[r * 3 + g], want);
      for (int64_t c = c0; c < c0 + n; ++c) EXPECT_EQ(q[r * cols + c], float_to_e4m3(x[r * cols + c] / want));
    }
  EXPECT_EQ(s[1 * 3 + 2], 50.0f / 448.0f);
  EXPECT_EQ(q[1 * cols + 290], 0x7e);
}

TEST(QuantFp8Group, Ue8m0ScalesArePowersOfTwo) {
  const int64_t rows = 4, cols = 256, group = 128;
  auto x = randn(rows * cols, 5, 10.0f);
  for (int64_t c = 0; c < group; ++c) x[c] = 0.0f;  // zero group: 1e-10 / 448 rounded up
  x[3 * cols + 130] = 448.0f;                       // scale exactly 1
  std::vector<uint8_t> q(rows * cols);
  std::vector<float> s(rows * 2);
  quantize_fp8_per_token_group(x.data(), rows, cols, group, true, q.data(), s.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < 2; ++g) {
      const float raw = std::max(amax(&x[r * cols + g * group], group), 1e-10f) / 448.0f;
      const float sc = s[r * 2 + g];
      int e;
      EXPECT_EQ(std::frexp(sc, &e), 0.5f);  // a power of two
      EXPECT_GE(sc, raw);
      EXPECT_LT(sc, 2 * raw);
      for (int64_t c = 0; c < group; ++c) {
        const float v = x[r * cols + g * group + c];
        EXPECT_EQ(q[r * cols + g * group + c], float_to_e4m3(v / sc));
        EXPECT_LE(std::fabs(v / sc), 448.0f);  // rounding the scale up never clips
      }
    }
  EXPECT_EQ(s[0], 0x1p-42f);
  EXPECT_EQ(s[3 * 2 + 1], 1.0f);
}

TEST(QuantFp8Group, RejectsBadGroup) {
  float x = 1;
  uint8_t q;
  float s;
  EXPECT_THROW(quantize_fp8_per_token_group(&x, 1, 1, 0, false, &q, &s), InvalidArgument);
}

// ---- NVFP4 ----

TEST(QuantNvfp4, GlobalScale) {
  const std::vector<float> x = {1.0f, -12.0f, 3.0f};
  EXPECT_EQ(nvfp4_global_scale(x.data(), 3), 448.0f * 6.0f / 12.0f);
  const std::vector<float> z = {0.0f, 0.0f};
  EXPECT_EQ(nvfp4_global_scale(z.data(), 2), 1.0f);
}

TEST(QuantNvfp4, HandBlock) {
  // gs = 1, amax = 6: sf = e4m3(1) = 0x38, q = e2m1(x).
  float x[32] = {0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -6.0f, 0.25f, 0.75f, -2.5f, 5.0f, 0, 0, 0, -0.5f};
  // Second block all zero: sf = 0, q = 0.
  uint8_t q[16], sf[2];
  quantize_nvfp4(x, 1, 32, 1.0f, q, sf);
  EXPECT_EQ(sf[0], 0x38);
  EXPECT_EQ(sf[1], 0x00);
  const uint8_t want[8] = {0x21, 0x43, 0x65, 0xf7, 0x20, 0x6c, 0x00, 0x90};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(q[i], want[i]) << i;
  for (int i = 8; i < 16; ++i) EXPECT_EQ(q[i], 0) << i;
}

TEST(QuantNvfp4, TiesGoToEven) {
  // gs = 1, amax 90 -> sf = e4m3(15) = 15: x * gs / sf hits every e2m1 tie exactly.
  const float m[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const uint8_t even[7] = {0, 2, 2, 4, 4, 6, 6};
  float x[16] = {6 * kTieScale};
  uint8_t want[16] = {7};
  for (int i = 0; i < 7; ++i) {
    x[1 + i] = kTieScale * m[i];
    want[1 + i] = even[i];
    x[8 + i] = -kTieScale * m[i];
    want[8 + i] = static_cast<uint8_t>(8 | even[i]);
  }
  x[15] = -6 * kTieScale;
  want[15] = 15;
  uint8_t q[8], sf;
  quantize_nvfp4(x, 1, 16, 1.0f, q, &sf);
  EXPECT_EQ(e4m3_to_float(sf), kTieScale);
  for (int i = 0; i < 16; ++i) EXPECT_EQ((q[i / 2] >> (4 * (i & 1))) & 0xf, want[i]) << x[i];
}

TEST(QuantNvfp4, MatchesFormulaAndBound) {
  const int64_t rows = 6, cols = 64;
  auto x = randn(rows * cols, 6, 2.0f);
  for (int i = 0; i < 16; ++i) x[1 * cols + 16 + i] = 0.0f;  // a zero block
  x[3 * cols + 5] = 40.0f;                                   // an outlier block
  const float gs = nvfp4_global_scale(x.data(), rows * cols);
  EXPECT_EQ(gs, 2688.0f / 40.0f);
  std::vector<uint8_t> q(rows * cols / 2), sf(rows * cols / 16);
  quantize_nvfp4(x.data(), rows, cols, gs, q.data(), sf.data());
  std::vector<float> deq(rows * cols);
  unpack_e2m1(q.data(), rows * cols, deq.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < cols / 16; ++b) {
      const float* xb = &x[r * cols + b * 16];
      const uint8_t code = float_to_e4m3(gs * amax(xb, 16) / 6.0f);
      EXPECT_EQ(sf[r * (cols / 16) + b], code);
      const float s = e4m3_to_float(code);
      for (int i = 0; i < 16; ++i) {
        const size_t k = static_cast<size_t>(r * cols + b * 16 + i);
        const uint8_t want = s == 0 ? 0 : float_to_e2m1(xb[i] * gs / s);
        EXPECT_EQ(float_to_e2m1(deq[k]), want & 0xf) << k;
        // Dequantised error is at most one e2m1 unit (the 4|6 gap's half) of this block.
        EXPECT_LE(std::fabs(deq[k] * s / gs - xb[i]), s / gs * 1.0001f) << k;
      }
    }
  EXPECT_EQ(sf[1 * 4 + 1], 0);
  EXPECT_EQ(sf[3 * 4 + 0], 0x7e);  // the tensor amax block: sf = 448
}

TEST(QuantNvfp4, RejectsRaggedCols) {
  std::vector<float> x(24, 1.0f);
  std::vector<uint8_t> q(12), sf(2);
  EXPECT_THROW(quantize_nvfp4(x.data(), 1, 24, 1.0f, q.data(), sf.data()), InvalidArgument);
}

// ---- FP8 128x128 block weights ----

TEST(QuantFp8Block, RaggedEdges) {
  const int64_t rows = 300, cols = 200;  // blocks: 3 x 2, last ones 44 rows / 72 cols
  auto w = randn(rows * cols, 7, 0.1f);
  for (int64_t r = 128; r < 256; ++r)
    for (int64_t c = 0; c < 128; ++c) w[r * cols + c] = 0.0f;  // zero block (1, 0)
  w[299 * cols + 199] = 5.0f;  // corner of the ragged block (2, 1)
  std::vector<uint8_t> q(rows * cols);
  std::vector<float> s(3 * 2);
  quantize_fp8_block_weight(w.data(), rows, cols, q.data(), s.data());
  for (int64_t br = 0; br < 3; ++br)
    for (int64_t bc = 0; bc < 2; ++bc) {
      float m = 0;
      for (int64_t r = br * 128; r < std::min(rows, br * 128 + 128); ++r)
        for (int64_t c = bc * 128; c < std::min(cols, bc * 128 + 128); ++c)
          m = std::max(m, std::fabs(w[r * cols + c]));
      const float want = std::max(m, 1e-10f) / 448.0f;
      EXPECT_EQ(s[br * 2 + bc], want) << br << "," << bc;
      for (int64_t r = br * 128; r < std::min(rows, br * 128 + 128); ++r)
        for (int64_t c = bc * 128; c < std::min(cols, bc * 128 + 128); ++c) {
          ASSERT_EQ(q[r * cols + c], float_to_e4m3(w[r * cols + c] / want));
          ASSERT_LE(std::fabs(e4m3_to_float(q[r * cols + c]) * want - w[r * cols + c]),
                    e4m3_err_bound(w[r * cols + c], want));
        }
    }
  EXPECT_EQ(s[1 * 2 + 0], 1e-10f / 448.0f);
  EXPECT_EQ(s[2 * 2 + 1], 5.0f / 448.0f);
  EXPECT_EQ(q[299 * cols + 199], 0x7e);
}

TEST(QuantFp8Block, RowStripesGiveSameResult) {
  // Callers parallelise by 128-row stripes: quantising the stripes separately must agree.
  const int64_t rows = 300, cols = 130;
  const auto w = randn(rows * cols, 8);
  std::vector<uint8_t> q1(rows * cols), q2(rows * cols);
  std::vector<float> s1(3 * 2), s2(3 * 2);
  quantize_fp8_block_weight(w.data(), rows, cols, q1.data(), s1.data());
  for (int64_t r0 = 0; r0 < rows; r0 += 128)
    quantize_fp8_block_weight(&w[r0 * cols], std::min<int64_t>(128, rows - r0), cols, &q2[r0 * cols],
                              &s2[r0 / 128 * 2]);
  EXPECT_EQ(q1, q2);
  EXPECT_EQ(s1, s2);
}

// ---- MXFP4 ----

TEST(QuantMxfp4, AmaxSevenBothRoundings) {
  float w[32] = {7.0f, 3.5f, -1.0f, 0.75f};
  uint8_t q[16], s[1];
  // OCP: e = 0, 7 clips to 6; 3.5 ties to 4; 0.75 ties to 1.
  quantize_mxfp4(w, 1, 32, Mxfp4ScaleRounding::OCP, q, s);
  EXPECT_EQ(s[0], 127);
  EXPECT_EQ(q[0], 0x67);  // 7 -> 6 (0x7), 3.5 -> 4 (0x6)
  EXPECT_EQ(q[1], 0x2a);  // -1 (0xa), 0.75 -> 1 (0x2)
  // NVIDIA: e = 1: 7/2 = 3.5 -> 4 (dequant 8), 3.5/2 = 1.75 -> 2, -0.5, 0.375 -> 0.5.
  quantize_mxfp4(w, 1, 32, Mxfp4ScaleRounding::NVIDIA, q, s);
  EXPECT_EQ(s[0], 128);
  EXPECT_EQ(q[0], 0x46);
  EXPECT_EQ(q[1], 0x19);
  for (int i = 2; i < 16; ++i) EXPECT_EQ(q[i], 0);
}

TEST(QuantMxfp4, MatchesFormulaAndBound) {
  const int64_t rows = 5, cols = 96;
  auto w = randn(rows * cols, 9, 0.02f);
  for (int i = 0; i < 32; ++i) w[2 * cols + 32 + i] = 0.0f;  // zero block -> code 0, q 0
  for (auto rounding : {Mxfp4ScaleRounding::OCP, Mxfp4ScaleRounding::NVIDIA}) {
    std::vector<uint8_t> q(rows * cols / 2), s(rows * cols / 32);
    quantize_mxfp4(w.data(), rows, cols, rounding, q.data(), s.data());
    std::vector<float> deq(rows * cols);
    unpack_e2m1(q.data(), rows * cols, deq.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t b = 0; b < cols / 32; ++b) {
        const float* wb = &w[r * cols + b * 32];
        const uint8_t code = mxfp4_scale_code(amax(wb, 32), rounding);
        ASSERT_EQ(s[r * (cols / 32) + b], code);
        const float sc = std::ldexp(1.0f, code - 127);
        for (int i = 0; i < 32; ++i) {
          const size_t k = static_cast<size_t>(r * cols + b * 32 + i);
          ASSERT_EQ(float_to_e2m1(deq[k]), float_to_e2m1(wb[i] / sc)) << k;
          // NVIDIA never clips (error <= 1 unit); OCP may clip values up to 8 to 6.
          const float bound = (rounding == Mxfp4ScaleRounding::NVIDIA ? 1.0f : 2.0f) * sc;
          EXPECT_LE(std::fabs(deq[k] * sc - wb[i]), bound) << k;
        }
      }
    EXPECT_EQ(s[2 * 3 + 1], 0);
  }
}

TEST(QuantMxfp4, RejectsRaggedCols) {
  std::vector<float> w(48, 1.0f);
  std::vector<uint8_t> q(24), s(2);
  EXPECT_THROW(quantize_mxfp4(w.data(), 1, 48, Mxfp4ScaleRounding::OCP, q.data(), s.data()),
               InvalidArgument);
}

// ---- int4 group ----

TEST(QuantInt4, RoundsToNearestEven) {
  // amax 7 -> s = 1 exactly, so q = clamp(rne(x)).
  std::vector<float> w;
  for (int i = -8 * 64; i <= 7 * 64; ++i) w.push_back(i / 64.0f);  // [-8, 7] step 1/64: all ties
  w.resize(1024, 0.0f);
  const int64_t cols = 1024, group = 1024;
  std::vector<int8_t> q(cols);
  uint16_t s;
  quantize_int4_group(w.data(), 1, cols, group, q.data(), &s);
  EXPECT_EQ(s, float_to_bf16_bits(8.0f / 7.0f));  // amax is 8 here (the -8 end)
  const float sc = bf16_bits_to_float(s);
  for (int64_t i = 0; i < cols; ++i) {
    const float want = std::min(7.0f, std::max(-8.0f, std::nearbyint(w[i] / sc)));
    ASSERT_EQ(q[i], static_cast<int8_t>(want)) << w[i];
  }
  // With s = 1 exactly: ties go to even.
  const float t[8] = {7.0f, 2.5f, 3.5f, -0.5f, -1.5f, 0.5f, -6.5f, 6.5f};
  int8_t qt[16];
  quantize_int4_group(t, 1, 8, 8, qt, &s);
  EXPECT_EQ(s, 0x3f80);
  const int8_t want[8] = {7, 2, 4, 0, -2, 0, -6, 6};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(qt[i], want[i]) << t[i];
  // s = 15 (amax 105): x / s hits the ties exactly, x * (1/s) would not.
  float t3[15] = {7 * kTieScale};
  int8_t want3[15] = {7};
  for (int k = -7; k < 7; ++k) {  // ties -6.5 .. 6.5
    t3[k + 8] = kTieScale * (k + 0.5f);
    want3[k + 8] = static_cast<int8_t>((k & 1) ? k + 1 : k);
  }
  quantize_int4_group(t3, 1, 15, 15, qt, &s);
  EXPECT_EQ(bf16_bits_to_float(s), kTieScale);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(qt[i], want3[i]) << t3[i];
}

TEST(QuantInt4, GroupsScalesAndBound) {
  const int64_t rows = 4, cols = 384, group = 128;
  auto w = randn(rows * cols, 10, 0.05f);
  for (int64_t c = 128; c < 256; ++c) w[1 * cols + c] = 0.0f;  // zero group -> s = 1, q = 0
  std::vector<int8_t> q(rows * cols);
  std::vector<uint16_t> s(rows * 3);
  quantize_int4_group(w.data(), rows, cols, group, q.data(), s.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < 3; ++g) {
      const float* wg = &w[r * cols + g * group];
      const float m = amax(wg, group);
      const uint16_t want = m == 0 ? 0x3f80 : float_to_bf16_bits(m / 7.0f);
      ASSERT_EQ(s[r * 3 + g], want);
      const float sc = bf16_bits_to_float(want);
      for (int64_t c = 0; c < group; ++c) {
        const int8_t v = q[r * cols + g * group + c];
        ASSERT_GE(v, -8);
        ASSERT_LE(v, 7);
        ASSERT_EQ(v, static_cast<int8_t>(std::min(7.0f, std::max(-8.0f, std::nearbyint(wg[c] / sc)))));
        // Half a step, plus the clip of |x| = amax when bf16 rounded s below amax / 7.
        EXPECT_LE(std::fabs(v * sc - wg[c]), std::max(0.5f * sc, m - 7 * sc) * 1.0001f);
      }
    }
  EXPECT_EQ(s[1 * 3 + 1], 0x3f80);
}

// ---- W4A8 scale split ----

TEST(QuantW4A8, SplitScales) {
  const int64_t rows = 3, groups = 5;
  std::vector<uint16_t> s(rows * groups);
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> d(1e-4f, 3e-3f);
  for (auto& v : s) v = float_to_bf16_bits(d(rng));
  for (int64_t j = 0; j < groups; ++j) s[2 * groups + j] = 0;  // all-zero row
  std::vector<float> c(rows);
  std::vector<uint8_t> g(rows * groups);
  w4a8_split_scales(s.data(), rows, groups, c.data(), g.data());
  for (int64_t r = 0; r < 2; ++r) {
    float m = 0;
    for (int64_t j = 0; j < groups; ++j) m = std::max(m, bf16_bits_to_float(s[r * groups + j]));
    EXPECT_EQ(c[r], 8.0f * m / 448.0f);
    for (int64_t j = 0; j < groups; ++j) {
      const float sv = bf16_bits_to_float(s[r * groups + j]);
      EXPECT_EQ(g[r * groups + j], float_to_e4m3(sv / c[r]));
      EXPECT_LE(e4m3_to_float(g[r * groups + j]), 56.0f);  // int4 (|q| <= 8) * g stays <= 448
      EXPECT_LE(std::fabs(e4m3_to_float(g[r * groups + j]) * c[r] - sv), e4m3_err_bound(sv, c[r]));
      if (sv == m) { EXPECT_EQ(e4m3_to_float(g[r * groups + j]), 56.0f); }
    }
  }
  EXPECT_EQ(c[2], 1.0f);
  for (int64_t j = 0; j < groups; ++j) EXPECT_EQ(g[2 * groups + j], 0);
}

TEST(QuantW4A8, SplitDividesAndTiesToEven) {
  // amax 392 -> c = 8 * 392 / 448 = 7; 7 * (e4m3 midpoint) / c is the tie itself. (7, not 15:
  // 15 * midpoint is rarely a bf16 value, and s * (1/7) misses ties that s * (1/15) would not.)
  const float k = 7.0f;
  std::vector<uint16_t> s = {float_to_bf16_bits(56 * k)};
  std::vector<uint8_t> want = {float_to_e4m3(56.0f)};
  for (int code = 0x08; code < 0x5f; ++code) {  // midpoints below 56
    const float mid = e4m3_midpoint(code);
    if (round_bf16(k * mid) != k * mid) continue;
    s.push_back(float_to_bf16_bits(k * mid));
    want.push_back(static_cast<uint8_t>((code & 1) ? code + 1 : code));
  }
  ASSERT_GE(s.size(), 80u);
  float c;
  std::vector<uint8_t> g(s.size());
  w4a8_split_scales(s.data(), 1, static_cast<int64_t>(s.size()), &c, g.data());
  EXPECT_EQ(c, k);
  EXPECT_EQ(g, want);
}

}  // namespace
}  // namespace fusedmoe
