// The nvfp4 quantisers' division-free step (src/cuda/nvfp4_round.cuh), run on the host, against the
// codec with an IEEE division: e2m1_to_float(float_to_e2m1(p / sf)) * sf, bit for bit, for every
// positive e4m3 scale, at and a few hundred ulps either side of every e2m1 decision point and grid
// value times the scale (where a quotient off by one ulp would change the code), both signs, zeros,
// subnormals, Inf, NaN and random values. The GPU test (tests/gpu/test_e2m1_device_gpu.cu) compares
// the device form with the device division form for every fp32 p and every scale.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "cuda/nvfp4_round.cuh"
#include "fusedmoe/codecs.hpp"

namespace fusedmoe {
namespace {

// The header's own bit casts (std::memcpy on the host).
uint32_t bits(float f) { return cuda::nvfp4r::f2u(f); }
float from_bits(uint32_t u) { return cuda::nvfp4r::u2f(u); }

float reference(float p, float sf) { return e2m1_to_float(float_to_e2m1(p / sf)) * sf; }

// Checks p against the reference; returns false (once reported) on a mismatch.
bool agrees(float p, float sf) {
  const float got = cuda::nvfp4r::e2m1_times_scale(p, sf, cuda::nvfp4r::recip(sf));
  const float want = reference(p, sf);
  if (bits(got) == bits(want)) return true;
  ADD_FAILURE() << "p = " << p << " (0x" << std::hex << bits(p) << "), sf = " << sf << ": got 0x" << bits(got)
                << ", want 0x" << bits(want) << std::dec;
  return false;
}

std::vector<float> positive_e4m3_scales() {
  std::vector<float> s;
  for (int c = 1; c < 0x7f; ++c) s.push_back(e4m3_to_float(static_cast<uint8_t>(c)));
  return s;
}

TEST(Nvfp4Round, AroundEveryDecisionPointForEveryScale) {
  const float points[] = {0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f};
  int64_t checked = 0;
  for (float sf : positive_e4m3_scales()) {
    for (float t : points) {
      const float base = t * sf;  // exact: t and sf have at most 3 and 4 significant bits
      for (float sign : {1.0f, -1.0f}) {
        float up = sign * base, down = sign * base;
        for (int k = 0; k <= 300; ++k) {
          if (!agrees(up, sf) || !agrees(down, sf)) return;
          up = std::nextafter(up, sign * std::numeric_limits<float>::infinity());
          down = std::nextafter(down, 0.0f);
          checked += 2;
        }
      }
    }
  }
  EXPECT_GT(checked, 126 * 16 * 2 * 600);
}

TEST(Nvfp4Round, SpecialAndRandomValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), from_bits(0xffc00000u),
                            from_bits(1u), from_bits(0x80000001u), from_bits(0x007fffffu), std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(), 1e-30f, -1e-30f, 1e30f, -1e30f};
  std::mt19937 rng(12345);
  std::uniform_int_distribution<uint32_t> any_bits;
  std::uniform_real_distribution<float> near(-10.0f, 10.0f);
  for (float sf : positive_e4m3_scales()) {
    for (float p : specials)
      if (!agrees(p, sf)) return;
    for (int i = 0; i < 4000; ++i) {
      if (!agrees(from_bits(any_bits(rng)), sf)) return;  // every exponent, NaN payloads included
      if (!agrees(near(rng) * sf, sf)) return;             // quotients in the e2m1 range
    }
  }
}

TEST(Nvfp4Round, NanIsPlusSixAndSignsAreKept) {
  // The codec's conventions, stated: a NaN quantises to +6 (either NaN sign), -0 and small negatives to -0.
  const float sf = 0.5f, y = cuda::nvfp4r::recip(sf);
  EXPECT_EQ(bits(cuda::nvfp4r::e2m1_times_scale(from_bits(0xffc00000u), sf, y)), bits(3.0f));
  EXPECT_EQ(bits(cuda::nvfp4r::e2m1_times_scale(-0.0f, sf, y)), bits(-0.0f));
  EXPECT_EQ(bits(cuda::nvfp4r::e2m1_times_scale(-0.1f, sf, y)), bits(-0.0f));
  EXPECT_EQ(bits(cuda::nvfp4r::e2m1_times_scale(-100.0f, sf, y)), bits(-3.0f));
  EXPECT_EQ(bits(cuda::nvfp4r::e2m1_times_scale(0.625f, sf, y)), bits(0.5f));    // q = 1.25: tie to 1
  EXPECT_EQ(bits(cuda::nvfp4r::e2m1_times_scale(0.875f, sf, y)), bits(1.0f));    // q = 1.75: tie to 2
  EXPECT_EQ(bits(cuda::nvfp4r::e2m1_times_scale(2.5f, sf, y)), bits(2.0f));      // q = 5: tie to 4
}

}  // namespace
}  // namespace fusedmoe
