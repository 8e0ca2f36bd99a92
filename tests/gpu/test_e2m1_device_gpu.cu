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
  unsigned long long bad = 0;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < (uint64_t{1} << 32);
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    uint32_t a[4], b[4];
    cuda::w4::decode_word<cuda::w4::kMx, false>(static_cast<uint32_t>(i), s2, false, a);
    cuda::w4::decode_word<cuda::w4::kMx, true>(static_cast<uint32_t>(i), s2, false, b);
    for (int j = 0; j < 4; ++j) bad += a[j] != b[j];
  }
  if (bad) atomicAdd(mismatches, bad);
}

TEST(E2m1Device, DecodeWordFormsAgreeOnEveryWord) {
  FMOE_REQUIRE_GPU();
  DeviceBuffer bad(8);
  const unsigned long long zero = 0;
  bad.upload(&zero, 8);
  decode_forms_kernel<<<1024, 256>>>(static_cast<unsigned long long*>(bad.get()));
  FMOE_CUDA(cudaGetLastError());
  FMOE_CUDA(cudaDeviceSynchronize());
  unsigned long long n = 1;
  bad.download(&n, 8);
  EXPECT_EQ(n, 0u);
}

}  // namespace
}  // namespace fusedmoe::gputest
