// The device e2m1 helpers of the nvfp4 (W4A4) activation quantisers (src/cuda/device_utils.cuh)
// against the CPU codecs (fusedmoe/codecs.hpp), bit for bit: every code's value, and the code of
// values around every rounding decision point, of both signs, zeros, saturation, Inf and NaN.
// The layer tests compare nvfp4-w4a4 with the oracle at a 1e-1 tolerance, which a wrong value for
// one code could pass; this test cannot.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cuda/device_utils.cuh"
#include "cuda/w4_decode.cuh"
#include "fusedmoe/codecs.hpp"
#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

__global__ void e2m1_kernel(const float* x, int n, uint32_t* codes, float* values) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 16) values[i] = cuda::e2m1_value(static_cast<uint32_t>(i));
  if (i < n) codes[i] = cuda::to_e2m1(x[i]);
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Runs launch(counter) on a zeroed device counter and returns the count it left (the exhaustive tests below).
template <class Launch>
unsigned long long device_count(Launch launch) {
  DeviceBuffer bad(8);
  const unsigned long long zero = 0;
  bad.upload(&zero, 8);
  launch(static_cast<unsigned long long*>(bad.get()));
  FMOE_CUDA(cudaGetLastError());
  FMOE_CUDA(cudaDeviceSynchronize());
  unsigned long long n = 1;
  bad.download(&n, 8);
  return n;
}

// Adds to *count how many of the 2^32 words w (spread over the grid's x dimension) differ(w) holds for.
template <class Differs>
__device__ void count_over_every_word(Differs differs, unsigned long long* count) {
  unsigned long long bad = 0;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < (uint64_t{1} << 32);
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x)
    bad += differs(static_cast<uint32_t>(i));
  if (bad) atomicAdd(count, bad);
}

TEST(E2m1Device, ValuesAndCodesMatchTheCpuCodec) {
  FMOE_REQUIRE_GPU();
  std::vector<float> x = {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), 1e30f, -1e30f, 7.0f, -100.0f, 1e-30f};
  for (float m : {0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 5.0f, 6.0f}) {
    for (float s : {1.0f, -1.0f}) {
      const float v = s * m;
      x.push_back(v);
      x.push_back(std::nextafter(v, 0.0f));
      x.push_back(std::nextafter(v, s * 100.0f));
    }
  }
  const int n = static_cast<int>(x.size());
  DeviceBuffer xd(x.size() * 4), cd(x.size() * 4), vd(16 * 4);
  xd.upload(x.data(), x.size() * 4);
  e2m1_kernel<<<(n + 127) / 128, 128>>>(static_cast<const float*>(xd.get()), n, static_cast<uint32_t*>(cd.get()),
                                        static_cast<float*>(vd.get()));
  FMOE_CUDA(cudaGetLastError());
  FMOE_CUDA(cudaDeviceSynchronize());
  std::vector<uint32_t> codes(x.size());
  std::vector<float> values(16);
  cd.download(codes.data(), codes.size() * 4);
  vd.download(values.data(), values.size() * 4);
  for (uint32_t c = 0; c < 16; ++c)
    EXPECT_EQ(bits(values[c]), bits(e2m1_to_float(static_cast<uint8_t>(c)))) << "code " << c;
  for (int i = 0; i < n; ++i) EXPECT_EQ(codes[i], float_to_e2m1(x[i])) << "x = " << x[i];
}

// The two e2m1 -> bf16 placements of decode_word (shifts and masks; mask, multiply, mask) over
// every 32-bit word, with a scale multiplier of 1 x 2^(126 - kE2m1Shift) (mxfp4 code 127): the
// count of words whose four pairs differ.
__global__ void decode_forms_kernel(unsigned long long* mismatches) {
  const uint32_t s2 = cuda::w4::scale_bits<cuda::w4::kMx>(127u);
  count_over_every_word(
      [&](uint32_t w) {
        uint32_t a[4], b[4];
        cuda::w4::decode_word<cuda::w4::kMx, false>(w, s2, false, a);
        cuda::w4::decode_word<cuda::w4::kMx, true>(w, s2, false, b);
        int differ = 0;
        for (int j = 0; j < 4; ++j) differ += a[j] != b[j];
        return differ;
      },
      mismatches);
}

TEST(E2m1Device, DecodeWordFormsAgreeOnEveryWord) {
  FMOE_REQUIRE_GPU();
  EXPECT_EQ(device_count([](unsigned long long* c) { decode_forms_kernel<<<1024, 256>>>(c); }), 0u);
}

// The nvfp4 quantisers' division-free step (nvfp4_round.cuh) against the division form it replaced,
// e2m1_value(to_e2m1(__fdiv_rn(p, sf))) * sf, on the device: every fp32 bit pattern p for every positive
// e4m3 scale sf (blockIdx.y): the count of differing results.
__global__ void nvfp4_round_kernel(unsigned long long* mismatches) {
  const float sf = cuda::e4m3_value(static_cast<uint8_t>(blockIdx.y + 1)), y = cuda::nvfp4r::recip(sf);
  count_over_every_word(
      [&](uint32_t w) {
        const float p = __uint_as_float(w);
        const float want = cuda::e2m1_value(cuda::to_e2m1(__fdiv_rn(p, sf))) * sf;
        return __float_as_uint(cuda::nvfp4r::e2m1_times_scale(p, sf, y)) != __float_as_uint(want);
      },
      mismatches);
}

TEST(E2m1Device, Nvfp4RoundEqualsTheDivisionFormForEveryValueAndScale) {
  FMOE_REQUIRE_GPU();
  // scale codes 1..126 (blockIdx.y + 1)
  EXPECT_EQ(device_count([](unsigned long long* c) { nvfp4_round_kernel<<<dim3(1056, 126), 256>>>(c); }), 0u);
}

// nvfp4_block_values (its scale, the zero-scale early out, the per-value step) against the same block
// computed with the division form, for random 16-blocks of bf16-exact values and global scales, every
// eighth block scaled down until its e4m3 scale is 0 and every sixteenth all zeros: the count of
// differing values.
__global__ void nvfp4_block_kernel(const float* x, const float* gs, int blocks, unsigned long long* mismatches) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= blocks) return;
  float v[16], w[16];
  for (int i = 0; i < 16; ++i) v[i] = w[i] = x[16 * b + i];
  cuda::nvfp4_block_values(v, gs[b]);
  float m = 0.0f;
  for (int i = 0; i < 16; ++i) m = fmaxf(m, cuda::abs_for_amax(w[i]));
  const float sf = cuda::nvfp4_block_scale(m, gs[b]);
  unsigned long long bad = 0;
  for (int i = 0; i < 16; ++i) {
    const float want = sf == 0.0f ? 0.0f : cuda::e2m1_value(cuda::to_e2m1(__fdiv_rn(w[i] * gs[b], sf))) * sf;
    bad += __float_as_uint(v[i]) != __float_as_uint(want);
  }
  if (bad) atomicAdd(mismatches, bad);
}

TEST(E2m1Device, Nvfp4BlockValuesEqualTheDivisionForm) {
  FMOE_REQUIRE_GPU();
  const int blocks = 1 << 16;
  std::vector<float> x(16 * static_cast<size_t>(blocks)), gs(blocks);
  uint32_t state = 987654321u;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (int b = 0; b < blocks; ++b) {
    gs[b] = std::ldexp(1.0f + (next() >> 9) * 0x1p-23f, static_cast<int>(next() % 16) - 4);
    for (int i = 0; i < 16; ++i) {
      // bf16-exact values (the operands are bf16 rows), magnitudes over 2^-8 .. 2^8, both signs
      float v = std::ldexp(1.0f + (next() >> 25) * 0x1p-7f, static_cast<int>(next() % 17) - 8);
      if (next() & 1) v = -v;
      if (b % 8 == 7) v = std::ldexp(v, -60);  // the block's scale underflows e4m3: all outputs +0
      if (b % 16 == 15) v = 0.0f;
      x[16 * static_cast<size_t>(b) + i] = v;
    }
  }
  DeviceBuffer xd(x.size() * 4), gd(gs.size() * 4);
  xd.upload(x.data(), x.size() * 4);
  gd.upload(gs.data(), gs.size() * 4);
  EXPECT_EQ(device_count([&](unsigned long long* c) {
              nvfp4_block_kernel<<<(blocks + 127) / 128, 128>>>(static_cast<const float*>(xd.get()),
                                                                static_cast<const float*>(gd.get()), blocks, c);
            }),
            0u);
}

// quant_tensor_rcp (the per-token fp8 quantisers' 8-value step, pack8_row_codes) against quant_row's IEEE division:
// every fp32 bit pattern v for each scale s of a list (blockIdx.y) - ROW scales are max(amax, 1e-10) / 448: from
// 1e-10 / 448 up to FLT_MAX / 448, or Inf where a value is; here those bounds, a few plain values and random mantissas
// over the exponent range: differing codes. (Outside that range the reciprocal of s > 2^126 is subnormal and
// Markstein's correction inexact: at s = FLT_MAX two codes of 2^32 differ, a quotient on the e4m3 subnormal tie.)
__global__ void quant_row_rcp_kernel(const float* scales, unsigned long long* mismatches) {
  const float s = scales[blockIdx.y], inv = __frcp_rn(s);
  count_over_every_word(
      [&](uint32_t w) {
        const float v = __uint_as_float(w);
        return cuda::quant_tensor_rcp(v, s, inv) != cuda::quant_row(v, s);
      },
      mismatches);
}

TEST(E2m1Device, QuantRowRcpEqualsTheDivisionForEveryValue) {
  FMOE_REQUIRE_GPU();
  std::vector<float> scales = {1e-10f / 448.0f, 1.0f / 448.0f, 1.0f, 0.5f, 3.0f / 448.0f, std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::max() / 448.0f};
  uint32_t state = 24680u;
  while (scales.size() < 40) {
    state = state * 1664525u + 1013904223u;
    const uint32_t mant = state >> 9;
    state = state * 1664525u + 1013904223u;
    const int ex = static_cast<int>(state % 100) - 80;  // 2^-80 .. 2^19: amax / 448 of any plausible row
    scales.push_back(std::ldexp(1.0f + mant * 0x1p-23f, ex));
  }
  DeviceBuffer sd(scales.size() * 4);
  sd.upload(scales.data(), scales.size() * 4);
  EXPECT_EQ(device_count([&](unsigned long long* c) {
              quant_row_rcp_kernel<<<dim3(1056, static_cast<unsigned>(scales.size())), 256>>>(
                  static_cast<const float*>(sd.get()), c);
            }),
            0u);
}

}  // namespace
}  // namespace fusedmoe::gputest
