// Codec tests: hand-checked tables, an independent table-search reference (nearest value, ties to
// the even code) run exhaustively where the domain is small, and, with the CUDA headers,
// cross-checks against CUDA's own host conversions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fusedmoe/codecs.hpp"

#if FUSEDMOE_HAVE_CUDA_HEADERS
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#endif

namespace fusedmoe {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// ---------------------------------------------------------------------------------------------
// Independent reference: a format is the sorted list of its non-negative values, code = index
// (true for every format here). Round |x| to the nearest value, ties to the even code; past the
// last value either saturate or go to the overflow code (Inf) at `inf_at` (its rounding point).
struct RefFormat {
  std::vector<double> vals;  // vals[c] = value of positive code c; !saturate: last = Inf's stand-in
  uint32_t sign_bit;         // code bit of the sign
  uint32_t nan_code;         // what NaN encodes to
  bool saturate;
  uint32_t inf_code = 0;     // !saturate: Inf's code, rounded to as if worth max + ulp
};

uint32_t ref_encode(const RefFormat& f, float x) {
  if (std::isnan(x)) return f.nan_code;
  const uint32_t sign = std::signbit(x) ? f.sign_bit : 0;
  const double a = std::fabs(static_cast<double>(x));
  const std::vector<double>& v = f.vals;
  if (a >= v.back()) return sign | (f.saturate ? static_cast<uint32_t>(v.size() - 1) : f.inf_code);
  const size_t lo = static_cast<size_t>(std::upper_bound(v.begin(), v.end(), a) - v.begin()) - 1;
  if (v[lo] == a) return sign | static_cast<uint32_t>(lo);
  const double twice = 2 * a, mid2 = v[lo] + v[lo + 1];  // both exact in double
  size_t c = twice < mid2 ? lo : (twice > mid2 ? lo + 1 : ((lo & 1) ? lo + 1 : lo));
  if (!f.saturate && c == v.size() - 1) return sign | f.inf_code;
  return sign | static_cast<uint32_t>(c);
}

// Cached copies: building the vectors once keeps the exhaustive loops fast.
struct Refs {
  RefFormat e4m3, e5m2, e2m1, bf16, fp16;
  Refs() {
    // e4m3: codes 0..0x7e; value from the definition (bias 7, 3 mantissa bits).
    for (int c = 0; c <= 0x7e; ++c) {
      const int e = c >> 3, m = c & 7;
      e4m3.vals.push_back(e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10));
    }
    e4m3.sign_bit = 0x80, e4m3.nan_code = 0x7f, e4m3.saturate = true;
    for (int c = 0; c <= 0x7b; ++c) {
      const int e = c >> 2, m = c & 3;
      e5m2.vals.push_back(e == 0 ? std::ldexp(m, -16) : std::ldexp(4 + m, e - 17));
    }
    e5m2.sign_bit = 0x80, e5m2.nan_code = 0x7f, e5m2.saturate = true;
    e2m1.vals = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    e2m1.sign_bit = 0x8, e2m1.nan_code = 0x7, e2m1.saturate = true;
    for (int c = 0; c < 0x7f80; ++c) {
      const int e = c >> 7, m = c & 127;
      bf16.vals.push_back(e == 0 ? std::ldexp(m, -133) : std::ldexp(128 + m, e - 134));
    }
    bf16.sign_bit = 0x8000, bf16.nan_code = 0x7fff, bf16.saturate = false;
    bf16.vals.push_back(std::ldexp(1.0, 128)), bf16.inf_code = 0x7f80;
    for (int c = 0; c < 0x7c00; ++c) {
      const int e = c >> 10, m = c & 1023;
      fp16.vals.push_back(e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25));
    }
    fp16.sign_bit = 0x8000, fp16.nan_code = 0x7fff, fp16.saturate = false;
    fp16.vals.push_back(65536.0), fp16.inf_code = 0x7c00;
  }
};
const Refs& refs() {
  static const Refs r;
  return r;
}

// Every float input the encoder tests sweep: all fp16 and bf16 bit patterns, specials, random
// bit patterns over the whole float range and random values inside the fp8 ranges.
std::vector<float> sweep_inputs() {
  std::vector<float> xs;
  for (uint32_t h = 0; h < 65536; ++h) xs.push_back(fp16_bits_to_float(static_cast<uint16_t>(h)));
  for (uint32_t b = 0; b < 65536; ++b) xs.push_back(from_bits(b << 16));
  for (float s : {kNaN, -kNaN, kInf, -kInf, 0.0f, -0.0f, FLT_MAX, -FLT_MAX, FLT_MIN, FLT_TRUE_MIN,
                  -FLT_TRUE_MIN, from_bits(0x7f800001u), from_bits(0xffc00001u)})
    xs.push_back(s);
  std::mt19937 rng(12345);
  for (int i = 0; i < 3000000; ++i) xs.push_back(from_bits(rng()));
  // Exponent in [-20, 17): where fp8/fp4/fp16 rounding actually happens.
  std::uniform_int_distribution<uint32_t> exp(127 - 20, 127 + 16);
  for (int i = 0; i < 2000000; ++i)
    xs.push_back(from_bits((rng() & 0x807fffffu) | (exp(rng) << 23)));
  return xs;
}
const std::vector<float>& inputs() {
  static const std::vector<float> xs = sweep_inputs();
  return xs;
}

// Midpoints between neighbouring values (and one float either side) of a format.
std::vector<float> halfway_inputs(const RefFormat& f) {
  std::vector<float> xs;
  for (size_t i = 0; i + 1 < f.vals.size(); ++i) {
    const double mid = (f.vals[i] + f.vals[i + 1]) / 2;
    const float m = static_cast<float>(mid);
    if (static_cast<double>(m) != mid) continue;  // midpoint not a float (never here)
    for (float s : {1.0f, -1.0f}) {
      xs.push_back(s * m);
      xs.push_back(s * std::nextafter(m, 0.0f));
      xs.push_back(s * std::nextafter(m, kInf));
    }
  }
  return xs;
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", v);
  return buf;
}

template <typename Enc>
void expect_matches_ref(const RefFormat& f, Enc enc, const std::vector<float>& xs) {
  int bad = 0;
  for (float x : xs) {
    const uint32_t got = enc(x), want = ref_encode(f, x);
    if (got != want && ++bad <= 10)
      ADD_FAILURE() << "x=" << x << " (" << hex(bits(x)) << "): got " << hex(got) << ", want " << hex(want);
  }
  EXPECT_EQ(bad, 0);
}

// ---------------------------------------------------------------------------------------------
// Hand-checked tables.

TEST(CodecE4M3, KnownDecode) {
  struct { uint8_t code; float v; } t[] = {
      {0x00, 0.0f}, {0x01, 0x1p-9f}, {0x07, 7 * 0x1p-9f}, {0x08, 0x1p-6f}, {0x30, 0.5f},
      {0x38, 1.0f}, {0x39, 1.125f}, {0x3c, 1.5f}, {0x40, 2.0f}, {0x4f, 7.5f}, {0x77, 240.0f},
      {0x7e, 448.0f}, {0x80, -0.0f}, {0xb8, -1.0f}, {0xfe, -448.0f}, {0x81, -0x1p-9f}};
  for (auto& e : t) EXPECT_EQ(bits(e4m3_to_float(e.code)), bits(e.v)) << hex(e.code);
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xff)));
}

TEST(CodecE4M3, KnownEncode) {
  struct { float x; uint8_t code; } t[] = {
      {0.0f, 0x00}, {-0.0f, 0x80}, {1.0f, 0x38}, {-1.0f, 0xb8}, {448.0f, 0x7e}, {449.0f, 0x7e},
      {463.99f, 0x7e}, {464.0f, 0x7e}, {465.0f, 0x7e}, {1e30f, 0x7e}, {-1e30f, 0xfe},
      {kInf, 0x7e}, {-kInf, 0xfe}, {416.0f, 0x7d},
      {432.0f, 0x7e},                                     // tie 416|448 -> even (448)
      {400.0f, 0x7c},                                     // tie 384|416 -> even (384)
      {7.3f, 0x4f}, {1.0625f, 0x38},                      // tie 1|1.125 -> even (1.0)
      {1.1875f, 0x3a},                                    // tie 1.125|1.25 -> even (1.25)
      {0x1p-10f, 0x00},                                   // half the smallest subnormal -> 0
      {std::nextafter(0x1p-10f, 1.0f), 0x01}, {-0x1p-10f, 0x80},
      {3 * 0x1p-10f, 0x02},                               // tie 1|2 (x2^-9) -> 2
      {0x1p-6f - 0x1p-10f, 0x08},                         // tie 7*2^-9|2^-6 -> even 0x08
      {1e-30f, 0x00}, {FLT_TRUE_MIN, 0x00}, {-FLT_TRUE_MIN, 0x80}};
  for (auto& e : t) EXPECT_EQ(float_to_e4m3(e.x), e.code) << "x=" << e.x;
  EXPECT_EQ(float_to_e4m3(kNaN), 0x7f);
  EXPECT_EQ(float_to_e4m3(-kNaN), 0x7f);  // CUDA drops the sign of NaN
}

TEST(CodecE5M2, KnownDecodeEncode) {
  struct { uint8_t code; float v; } t[] = {{0x00, 0.0f}, {0x01, 0x1p-16f}, {0x04, 0x1p-14f},
                                            {0x3c, 1.0f}, {0x3d, 1.25f}, {0x40, 2.0f},
                                            {0x7b, 57344.0f}, {0x7c, kInf}, {0xfc, -kInf},
                                            {0xbc, -1.0f}, {0x80, -0.0f}};
  for (auto& e : t) EXPECT_EQ(bits(e5m2_to_float(e.code)), bits(e.v)) << hex(e.code);
  for (uint8_t c : {0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff}) EXPECT_TRUE(std::isnan(e5m2_to_float(c)));
  struct { float x; uint8_t code; } enc[] = {
      {1.0f, 0x3c}, {1.125f, 0x3c}, {1.375f, 0x3e}, {57344.0f, 0x7b}, {61439.99f, 0x7b},
      {61440.0f, 0x7b}, {1e9f, 0x7b}, {kInf, 0x7b}, {-kInf, 0xfb}, {0x1p-17f, 0x00},
      {3 * 0x1p-17f, 0x02}, {-0.0f, 0x80}, {kNaN, 0x7f}, {-kNaN, 0x7f}};
  for (auto& e : enc) EXPECT_EQ(float_to_e5m2(e.x), e.code) << "x=" << e.x;
}

TEST(CodecE2M1, KnownDecodeAll16) {
  const float want[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (int c = 0; c < 16; ++c) EXPECT_EQ(bits(e2m1_to_float(static_cast<uint8_t>(c))), bits(want[c]));
  EXPECT_EQ(e2m1_to_float(0xf3), 1.5f);  // only the low nibble counts
}

TEST(CodecE2M1, KnownEncode) {
  struct { float x; uint8_t code; } t[] = {
      {0.0f, 0}, {-0.0f, 8}, {0.25f, 0}, {std::nextafter(0.25f, 1.0f), 1}, {0.5f, 1},
      {0.75f, 2}, {1.25f, 2}, {1.26f, 3}, {1.75f, 4}, {2.5f, 4}, {2.51f, 5}, {3.5f, 6},
      {5.0f, 6}, {5.01f, 7}, {6.0f, 7}, {100.0f, 7}, {kInf, 7}, {-kInf, 15}, {-0.1f, 8},
      {-0.3f, 9}, {-5.5f, 15}, {-2.5f, 12}, {FLT_TRUE_MIN, 0}};
  for (auto& e : t) EXPECT_EQ(float_to_e2m1(e.x), e.code) << "x=" << e.x;
  EXPECT_EQ(float_to_e2m1(kNaN), 7);   // cuda_fp4.h: NaN -> +6
  EXPECT_EQ(float_to_e2m1(-kNaN), 7);
}

TEST(CodecE2M1, PackUnpack) {
  const float x[5] = {0.5f, -6.0f, 3.0f, 1.0f, 4.0f};
  uint8_t p[3] = {0xaa, 0xaa, 0xaa};
  pack_e2m1(x, 4, p);
  EXPECT_EQ(p[0], 0xf1);  // element 0 in the low nibble
  EXPECT_EQ(p[1], 0x25);
  EXPECT_EQ(p[2], 0xaa);  // untouched
  pack_e2m1(x, 5, p);
  EXPECT_EQ(p[2], 0x06);  // odd tail: high nibble 0
  float y[5];
  unpack_e2m1(p, 5, y);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(y[i], x[i]);
  // All 256 bytes round trip.
  for (int b = 0; b < 256; ++b) {
    const uint8_t in = static_cast<uint8_t>(b);
    float v[2];
    unpack_e2m1(&in, 2, v);
    uint8_t out;
    pack_e2m1(v, 2, &out);
    EXPECT_EQ(out, in);
  }
}

TEST(CodecBf16, Known) {
  struct { float x; uint16_t b; } t[] = {
      {1.0f, 0x3f80}, {-2.0f, 0xc000}, {1.00390625f, 0x3f80} /* tie -> even */,
      {1.01171875f, 0x3f82} /* tie 0x3f81|0x3f82 -> even */, {3.14159265f, 0x4049},
      {FLT_MAX, 0x7f80} /* rounds past bf16 max */, {-FLT_MAX, 0xff80}, {kInf, 0x7f80},
      {-kInf, 0xff80}, {FLT_TRUE_MIN, 0x0000}, {0x1p-133f, 0x0001}, {-0.0f, 0x8000}};
  for (auto& e : t) EXPECT_EQ(float_to_bf16_bits(e.x), e.b) << "x=" << e.x;
  EXPECT_EQ(float_to_bf16_bits(kNaN), 0x7fff);
  EXPECT_EQ(float_to_bf16_bits(-kNaN), 0x7fff);
  EXPECT_EQ(bf16_bits_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bf16_bits_to_float(0xc049), -3.140625f);
  EXPECT_EQ(round_bf16(1.00390625f), 1.0f);
}

TEST(CodecFp16, Known) {
  struct { float x; uint16_t h; } t[] = {
      {1.0f, 0x3c00}, {-2.0f, 0xc000}, {0.1f, 0x2e66}, {1.0f / 3, 0x3555}, {65504.0f, 0x7bff},
      {65519.0f, 0x7bff}, {65520.0f, 0x7c00}, {1e6f, 0x7c00}, {-1e6f, 0xfc00},
      {0x1p-24f, 0x0001}, {0x1p-25f, 0x0000}, {std::nextafter(0x1p-25f, 1.0f), 0x0001},
      {3 * 0x1p-25f, 0x0002}, {0x1p-14f, 0x0400}, {-0.0f, 0x8000}, {kInf, 0x7c00},
      {1.0f + 0x1p-11f, 0x3c00} /* tie -> even */, {1.0f + 3 * 0x1p-11f, 0x3c02}};
  for (auto& e : t) EXPECT_EQ(float_to_fp16_bits(e.x), e.h) << "x=" << e.x;
  EXPECT_EQ(float_to_fp16_bits(kNaN), 0x7fff);
  EXPECT_EQ(fp16_bits_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(fp16_bits_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_bits_to_float(0xfc00), -kInf);
  EXPECT_TRUE(std::isnan(fp16_bits_to_float(0x7e00)));
  EXPECT_EQ(round_fp16(0.1f), 0.0999755859375f);
}

// ---------------------------------------------------------------------------------------------
// Exhaustive / large sweeps against the reference.

TEST(CodecE4M3, DecodeAll256MatchesDefinition) {
  const RefFormat& f = refs().e4m3;
  for (int c = 0; c < 256; ++c) {
    const float v = e4m3_to_float(static_cast<uint8_t>(c));
    if ((c & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(v));
      continue;
    }
    const double want = (c & 0x80 ? -1 : 1) * f.vals[c & 0x7f];
    EXPECT_EQ(static_cast<double>(v), want) << c;
    EXPECT_EQ(std::signbit(v), (c & 0x80) != 0) << c;
    EXPECT_EQ(float_to_e4m3(v), c) << c;  // round trip
  }
}

TEST(CodecE5M2, DecodeAll256MatchesDefinition) {
  const RefFormat& f = refs().e5m2;
  for (int c = 0; c < 256; ++c) {
    const float v = e5m2_to_float(static_cast<uint8_t>(c));
    const int a = c & 0x7f;
    if (a > 0x7c) {
      EXPECT_TRUE(std::isnan(v));
    } else if (a == 0x7c) {
      EXPECT_EQ(v, (c & 0x80) ? -kInf : kInf);
    } else {
      EXPECT_EQ(static_cast<double>(v), (c & 0x80 ? -1 : 1) * f.vals[a]) << c;
      EXPECT_EQ(std::signbit(v), (c & 0x80) != 0) << c;
      EXPECT_EQ(float_to_e5m2(v), c) << c;
    }
    // e5m2 is the top byte of fp16.
    if (a <= 0x7c) { EXPECT_EQ(bits(v), bits(fp16_bits_to_float(static_cast<uint16_t>(c << 8)))); }
  }
}

TEST(CodecE4M3, EncodeSweepMatchesReference) {
  expect_matches_ref(refs().e4m3, float_to_e4m3, inputs());
  expect_matches_ref(refs().e4m3, float_to_e4m3, halfway_inputs(refs().e4m3));
}
TEST(CodecE5M2, EncodeSweepMatchesReference) {
  expect_matches_ref(refs().e5m2, float_to_e5m2, inputs());
  expect_matches_ref(refs().e5m2, float_to_e5m2, halfway_inputs(refs().e5m2));
}
TEST(CodecE2M1, EncodeSweepMatchesReference) {
  expect_matches_ref(refs().e2m1, float_to_e2m1, inputs());
  expect_matches_ref(refs().e2m1, float_to_e2m1, halfway_inputs(refs().e2m1));
}
TEST(CodecBf16, EncodeSweepMatchesReference) {
  expect_matches_ref(refs().bf16, float_to_bf16_bits, inputs());
  expect_matches_ref(refs().bf16, float_to_bf16_bits, halfway_inputs(refs().bf16));
}
TEST(CodecFp16, EncodeSweepMatchesReference) {
  expect_matches_ref(refs().fp16, float_to_fp16_bits, inputs());
  expect_matches_ref(refs().fp16, float_to_fp16_bits, halfway_inputs(refs().fp16));
}

TEST(CodecBf16, DecodeAllAndRoundTrip) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float v = bf16_bits_to_float(static_cast<uint16_t>(b));
    EXPECT_EQ(bits(v), b << 16);
    if (!std::isnan(v)) { EXPECT_EQ(float_to_bf16_bits(v), b); }
  }
}

TEST(CodecFp16, DecodeAllAndRoundTrip) {
  const RefFormat& f = refs().fp16;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float v = fp16_bits_to_float(static_cast<uint16_t>(h));
    const uint32_t a = h & 0x7fff;
    if (a > 0x7c00) {
      EXPECT_TRUE(std::isnan(v));
      continue;
    }
    if (a == 0x7c00)
      EXPECT_EQ(v, (h & 0x8000) ? -kInf : kInf);
    else
      EXPECT_EQ(static_cast<double>(v), (h & 0x8000 ? -1 : 1) * f.vals[a]) << h;
    EXPECT_EQ(std::signbit(v), (h & 0x8000) != 0);
    EXPECT_EQ(float_to_fp16_bits(v), h);
  }
}

// ---------------------------------------------------------------------------------------------
// E8M0 and MXFP4 exponent choice.

TEST(CodecE8M0, Decode) {
  EXPECT_EQ(e8m0_to_float(127), 1.0f);
  EXPECT_EQ(e8m0_to_float(128), 2.0f);
  EXPECT_EQ(e8m0_to_float(1), 0x1p-126f);
  EXPECT_EQ(e8m0_to_float(0), 0x1p-127f);
  EXPECT_EQ(e8m0_to_float(254), 0x1p127f);
  EXPECT_TRUE(std::isnan(e8m0_to_float(255)));
  for (int c = 0; c < 255; ++c) EXPECT_EQ(e8m0_to_float(static_cast<uint8_t>(c)), std::ldexp(1.0f, c - 127));
}

uint8_t clamp_code(int e) { return static_cast<uint8_t>(std::min(254, std::max(0, e + 127))); }

// Reference by search, exact in double: OCP: largest e with 4 * 2^e <= amax;
// NVIDIA: smallest e with amax <= 6 * 2^e.
uint8_t ref_scale_code(float amax, Mxfp4ScaleRounding r) {
  const double a = amax;
  if (r == Mxfp4ScaleRounding::OCP) {
    int e = -200;
    while (std::ldexp(4.0, e + 1) <= a) ++e;
    return clamp_code(e);
  }
  int e = -200;
  while (a > std::ldexp(6.0, e)) ++e;
  return clamp_code(e);
}

TEST(CodecMxfp4Scale, Names) {
  EXPECT_STREQ(mxfp4_rounding_name(Mxfp4ScaleRounding::OCP), "ocp");
  EXPECT_STREQ(mxfp4_rounding_name(Mxfp4ScaleRounding::NVIDIA), "nvidia");
}

TEST(CodecMxfp4Scale, Known) {
  using R = Mxfp4ScaleRounding;
  // amax = 7: OCP e = floor(log2 7) - 2 = 0; NVIDIA e = ceil(log2(7/6)) = 1.
  EXPECT_EQ(mxfp4_scale_code(7.0f, R::OCP), 127);
  EXPECT_EQ(mxfp4_scale_code(7.0f, R::NVIDIA), 128);
  EXPECT_EQ(mxfp4_scale_code(6.0f, R::OCP), 127);
  EXPECT_EQ(mxfp4_scale_code(6.0f, R::NVIDIA), 127);
  EXPECT_EQ(mxfp4_scale_code(std::nextafter(6.0f, 7.0f), R::NVIDIA), 128);
  EXPECT_EQ(mxfp4_scale_code(4.0f, R::OCP), 127);
  EXPECT_EQ(mxfp4_scale_code(4.0f, R::NVIDIA), 127);
  EXPECT_EQ(mxfp4_scale_code(std::nextafter(4.0f, 0.0f), R::OCP), 126);
  EXPECT_EQ(mxfp4_scale_code(12.0f, R::NVIDIA), 128);
  EXPECT_EQ(mxfp4_scale_code(std::nextafter(12.0f, 13.0f), R::NVIDIA), 129);
  EXPECT_EQ(mxfp4_scale_code(-7.0f, R::NVIDIA), 128);  // sign ignored
  EXPECT_EQ(mxfp4_scale_code(0.0f, R::OCP), 0);
  EXPECT_EQ(mxfp4_scale_code(0.0f, R::NVIDIA), 0);
  EXPECT_EQ(mxfp4_scale_code(FLT_MAX, R::OCP), 252);     // floor(log2) = 127
  EXPECT_EQ(mxfp4_scale_code(FLT_MAX, R::NVIDIA), 253);  // ceil(128 - log2 6) = 126
  EXPECT_EQ(mxfp4_scale_code(kInf, R::OCP), 254);
  EXPECT_EQ(mxfp4_scale_code(kNaN, R::OCP), 255);
  EXPECT_EQ(mxfp4_scale_code(0x1p-125f, R::OCP), 0);
  EXPECT_EQ(mxfp4_scale_code(0x1p-124f, R::OCP), 1);
  EXPECT_EQ(mxfp4_scale_code(1.5f * 0x1p-125f, R::NVIDIA), 0);  // 6 * 2^-127: e = -127
  EXPECT_EQ(mxfp4_scale_code(std::nextafter(1.5f * 0x1p-125f, 1.0f), R::NVIDIA), 1);
  for (R r : {R::OCP, R::NVIDIA}) {
    EXPECT_EQ(mxfp4_scale_code(FLT_TRUE_MIN, r), 0);  // subnormal amax: clamps to code 0
    EXPECT_EQ(mxfp4_scale_code(0x1p-130f, r), 0);
  }
}

TEST(CodecMxfp4Scale, PowersOfTwoAndSixTimesPowers) {
  using R = Mxfp4ScaleRounding;
  for (int k = -149; k <= 127; ++k) {
    const float p = std::ldexp(1.0f, k);
    // amax = 2^k: floor(log2) - 2 = k - 2; ceil(k - log2 6) = k - 2.
    EXPECT_EQ(mxfp4_scale_code(p, R::OCP), clamp_code(k - 2)) << k;
    EXPECT_EQ(mxfp4_scale_code(p, R::NVIDIA), clamp_code(k - 2)) << k;
    if (k > 125 || k < -146) continue;
    const float six = 6.0f * p;  // exact
    EXPECT_EQ(mxfp4_scale_code(six, R::NVIDIA), clamp_code(k)) << k;
    EXPECT_EQ(mxfp4_scale_code(std::nextafter(six, kInf), R::NVIDIA), clamp_code(k + 1)) << k;
    EXPECT_EQ(mxfp4_scale_code(six, R::OCP), clamp_code(k)) << k;  // log2 6 = 2.58 -> k + 2 - 2
  }
}

TEST(CodecMxfp4Scale, RandomMatchesSearch) {
  std::mt19937 rng(7);
  for (int i = 0; i < 50000; ++i) {
    const float a = from_bits(rng() % 0x7f800000u);  // positive finite
    for (auto r : {Mxfp4ScaleRounding::OCP, Mxfp4ScaleRounding::NVIDIA})
      ASSERT_EQ(mxfp4_scale_code(a, r), ref_scale_code(a, r)) << a;
  }
}

TEST(CodecRoundUpPow2, Values) {
  EXPECT_EQ(round_up_pow2(1.0f), 1.0f);
  EXPECT_EQ(round_up_pow2(std::nextafter(1.0f, 2.0f)), 2.0f);
  EXPECT_EQ(round_up_pow2(0.75f), 1.0f);
  EXPECT_EQ(round_up_pow2(3.0f), 4.0f);
  EXPECT_EQ(round_up_pow2(1e-10f / 448), 0x1p-42f);  // 2.23e-13: 2^-43 < x <= 2^-42
  EXPECT_EQ(round_up_pow2(0x1p-140f), 0x1p-140f);
  EXPECT_EQ(round_up_pow2(3 * FLT_TRUE_MIN), 4 * FLT_TRUE_MIN);
  EXPECT_EQ(round_up_pow2(FLT_MAX), kInf);
  EXPECT_EQ(round_up_pow2(0.0f), 0.0f);
  std::mt19937 rng(3);
  for (int i = 0; i < 100000; ++i) {
    const float x = from_bits(rng() % 0x7f000000u + 1);
    const float p = round_up_pow2(x);
    ASSERT_GE(p, x);
    ASSERT_LT(static_cast<double>(p), 2.0 * x);
    int e;
    ASSERT_EQ(std::frexp(p, &e), 0.5f);
  }
}

// ---------------------------------------------------------------------------------------------
// int4

TEST(CodecInt4, Known) {
  const int8_t q[3] = {-1, 2, -8};
  uint8_t p[2] = {0, 0xee};
  pack_int4(q, 2, p);
  EXPECT_EQ(p[0], 0x2f);
  pack_int4(q, 3, p);
  EXPECT_EQ(p[1], 0x08);
  pack_uint4b8(q, 2, p);
  EXPECT_EQ(p[0], 0xa7);  // -1 + 8 = 7 low, 2 + 8 = 10 high
  pack_uint4b8(q, 3, p);
  EXPECT_EQ(p[1], 0x00);
}

TEST(CodecInt4, ExhaustiveRoundTrip) {
  for (int b = 0; b < 256; ++b) {
    const uint8_t in = static_cast<uint8_t>(b);
    int8_t s[2], u[2];
    unpack_int4(&in, 2, s);
    unpack_uint4b8(&in, 2, u);
    EXPECT_EQ(s[0], (b & 0xf) >= 8 ? (b & 0xf) - 16 : (b & 0xf));
    EXPECT_EQ(s[1], (b >> 4) >= 8 ? (b >> 4) - 16 : (b >> 4));
    EXPECT_EQ(u[0], (b & 0xf) - 8);
    EXPECT_EQ(u[1], (b >> 4) - 8);
    uint8_t ps, pu;
    pack_int4(s, 2, &ps);
    pack_uint4b8(u, 2, &pu);
    EXPECT_EQ(ps, in);
    EXPECT_EQ(pu, in);
  }
  for (int a = -8; a <= 7; ++a)
    for (int b = -8; b <= 7; ++b) {
      const int8_t q[2] = {static_cast<int8_t>(a), static_cast<int8_t>(b)};
      uint8_t p;
      int8_t back[2];
      pack_int4(q, 2, &p);
      unpack_int4(&p, 2, back);
      EXPECT_EQ(back[0], a);
      EXPECT_EQ(back[1], b);
      pack_uint4b8(q, 2, &p);
      unpack_uint4b8(&p, 2, back);
      EXPECT_EQ(back[0], a);
      EXPECT_EQ(back[1], b);
    }
}

// ---------------------------------------------------------------------------------------------
// 128x4 swizzle

TEST(CodecSwizzle, HandComputedOffsets) {
  // cols = 6 -> padded 8, kt = 2, one 128-row tile = 1024 bytes.
  EXPECT_EQ(swizzled_scale_offset(0, 0, 6), 0u);
  EXPECT_EQ(swizzled_scale_offset(0, 1, 6), 1u);
  EXPECT_EQ(swizzled_scale_offset(0, 4, 6), 512u);
  EXPECT_EQ(swizzled_scale_offset(1, 0, 6), 16u);
  EXPECT_EQ(swizzled_scale_offset(32, 0, 6), 4u);
  EXPECT_EQ(swizzled_scale_offset(127, 3, 6), 511u);  // 31*16 + 3*4 + 3
  EXPECT_EQ(swizzled_scale_offset(128, 0, 6), 1024u);
  EXPECT_EQ(swizzled_scale_offset(200, 5, 6), 1673u);  // 1024 + 512 + 8*16 + 2*4 + 1
  EXPECT_EQ(swizzled_scale_bytes(200, 6), 2048u);
  EXPECT_EQ(swizzled_scale_bytes(1, 1), 512u);
  EXPECT_EQ(swizzled_scale_bytes(128, 4), 512u);
  EXPECT_EQ(swizzled_scale_bytes(0, 5), 0u);
}

// The layout as vLLM's swizzle_blockscale writes it: view the padded matrix as
// [M/128, 4, 32, K/4, 4] and permute to [M/128, K/4, 32, 4, 4].
size_t reshape_permute_offset(int64_t m, int64_t k, int64_t cols) {
  const int64_t kt = (cols + 3) / 4;
  const int64_t mt = m / 128, i4 = (m % 128) / 32, i32 = m % 32, kb = k / 4, j = k % 4;
  return static_cast<size_t>((((mt * kt + kb) * 32 + i32) * 4 + i4) * 4 + j);
}

TEST(CodecSwizzle, MatchesReshapePermuteAndIsBijective) {
  for (int64_t rows : {1, 31, 128, 129, 300}) {
    for (int64_t cols : {1, 3, 4, 5, 8, 13}) {
      const int64_t pr = (rows + 127) / 128 * 128, pc = (cols + 3) / 4 * 4;
      std::vector<int> seen(swizzled_scale_bytes(rows, cols), 0);
      for (int64_t m = 0; m < pr; ++m)
        for (int64_t k = 0; k < pc; ++k) {
          const size_t o = swizzled_scale_offset(m, k, cols);
          ASSERT_EQ(o, reshape_permute_offset(m, k, cols));
          ASSERT_LT(o, seen.size());
          ++seen[o];
        }
      EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
    }
  }
}

TEST(CodecSwizzle, RoundTripOddSizesAndZeroPadding) {
  std::mt19937 rng(11);
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {129, 5}, {200, 6}, {300, 7}, {128, 4}, {256, 8}, {7, 130}}) {
    std::vector<uint8_t> flat(static_cast<size_t>(rows * cols));
    for (auto& b : flat) b = static_cast<uint8_t>(1 + rng() % 255);  // nonzero
    std::vector<uint8_t> sw(swizzled_scale_bytes(rows, cols), 0xcc);
    swizzle_scales_128x4(flat.data(), rows, cols, sw.data());
    EXPECT_EQ(static_cast<int64_t>(std::count_if(sw.begin(), sw.end(), [](uint8_t b) { return b != 0; })),
              rows * cols);  // every padding byte is 0
    for (int64_t m = 0; m < rows; ++m)
      for (int64_t k = 0; k < cols; ++k)
        ASSERT_EQ(sw[swizzled_scale_offset(m, k, cols)], flat[m * cols + k]);
    std::vector<uint8_t> back(flat.size(), 0);
    unswizzle_scales_128x4(sw.data(), rows, cols, back.data());
    EXPECT_EQ(back, flat) << rows << "x" << cols;
  }
}

// ---------------------------------------------------------------------------------------------
// Cross-checks against CUDA's own host conversions.
#if FUSEDMOE_HAVE_CUDA_HEADERS

uint8_t cuda_e4m3(float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); }
uint8_t cuda_e5m2(float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2); }
uint8_t cuda_e2m1(float x) { return __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest); }
uint16_t cuda_bf16(float x) {
  const __nv_bfloat16 b = __float2bfloat16_rn(x);
  return static_cast<__nv_bfloat16_raw>(b).x;
}
uint16_t cuda_fp16(float x) {
  const __half h = __float2half_rn(x);
  return static_cast<__half_raw>(h).x;
}
float cuda_halfraw_to_float(__half_raw h) { return __half2float(__half(h)); }

template <typename Ours, typename Theirs>
void expect_same_encode(Ours ours, Theirs theirs, const std::vector<float>& xs) {
  int bad = 0;
  for (float x : xs) {
    const uint32_t a = ours(x), b = theirs(x);
    if (a != b && ++bad <= 10)
      ADD_FAILURE() << "x=" << x << " (" << hex(bits(x)) << "): ours " << hex(a) << ", CUDA " << hex(b);
  }
  EXPECT_EQ(bad, 0);
}

TEST(CodecCuda, E4M3EncodeMatches) {
  expect_same_encode(float_to_e4m3, cuda_e4m3, inputs());
  expect_same_encode(float_to_e4m3, cuda_e4m3, halfway_inputs(refs().e4m3));
}
TEST(CodecCuda, E5M2EncodeMatches) {
  expect_same_encode(float_to_e5m2, cuda_e5m2, inputs());
  expect_same_encode(float_to_e5m2, cuda_e5m2, halfway_inputs(refs().e5m2));
}
TEST(CodecCuda, E2M1EncodeMatches) {
  expect_same_encode(float_to_e2m1, cuda_e2m1, inputs());
  expect_same_encode(float_to_e2m1, cuda_e2m1, halfway_inputs(refs().e2m1));
}
TEST(CodecCuda, Bf16EncodeMatches) {
  expect_same_encode(float_to_bf16_bits, cuda_bf16, inputs());
  expect_same_encode(float_to_bf16_bits, cuda_bf16, halfway_inputs(refs().bf16));
}
TEST(CodecCuda, Fp16EncodeMatches) {
  expect_same_encode(float_to_fp16_bits, cuda_fp16, inputs());
  expect_same_encode(float_to_fp16_bits, cuda_fp16, halfway_inputs(refs().fp16));
}

// Decodes compare bits exactly, NaN included (CUDA's canonical NaN reaches float as 0x7fffffff).
TEST(CodecCuda, Fp8DecodeAll256Matches) {
  for (int c = 0; c < 256; ++c) {
    const auto s = static_cast<__nv_fp8_storage_t>(c);
    EXPECT_EQ(bits(e4m3_to_float(static_cast<uint8_t>(c))),
              bits(cuda_halfraw_to_float(__nv_cvt_fp8_to_halfraw(s, __NV_E4M3)))) << c;
    EXPECT_EQ(bits(e5m2_to_float(static_cast<uint8_t>(c))),
              bits(cuda_halfraw_to_float(__nv_cvt_fp8_to_halfraw(s, __NV_E5M2)))) << c;
  }
}

TEST(CodecCuda, E2M1DecodeAll16Matches) {
  for (int c = 0; c < 16; ++c) {
    const auto s = static_cast<__nv_fp4_storage_t>(c);
    EXPECT_EQ(bits(e2m1_to_float(static_cast<uint8_t>(c))),
              bits(cuda_halfraw_to_float(__nv_cvt_fp4_to_halfraw(s, __NV_E2M1)))) << c;
  }
}

TEST(CodecCuda, Fp16Bf16DecodeAllMatches) {
  for (uint32_t v = 0; v < 65536; ++v) {
    __half_raw h;
    h.x = static_cast<unsigned short>(v);
    __nv_bfloat16_raw b;
    b.x = static_cast<unsigned short>(v);
    ASSERT_EQ(bits(fp16_bits_to_float(static_cast<uint16_t>(v))), bits(cuda_halfraw_to_float(h))) << v;
    ASSERT_EQ(bits(bf16_bits_to_float(static_cast<uint16_t>(v))), bits(__bfloat162float(__nv_bfloat16(b))))
        << v;
  }
}

#endif  // FUSEDMOE_HAVE_CUDA_HEADERS

}  // namespace
}  // namespace fusedmoe
