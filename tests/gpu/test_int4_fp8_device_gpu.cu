// The int4 -> fp8 decodes of the W4A8 wgmma kernel (src/cuda/int4_e4m3.cuh) run on the device and
// compared bit for bit with the same functions on the host (whose prmt / fp16 emulations the CPU
// test tests/cpu/test_int4_e4m3.cpp checks against the codecs): every 16-bit half-word pattern
// in both halves, both storage forms.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "cuda/int4_e4m3.cuh"
#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

__host__ __device__ uint32_t word_of(uint32_t h) { return h | (((h * 40503u) & 0xFFFFu) << 16); }

__global__ void decode_kernel(uint32_t flip, uint32_t* e4m3, uint32_t* e5m2) {
  const uint32_t h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= 65536u) return;
  const uint32_t x = word_of(h);
  const auto a = cuda::int4e4m3::int4x8_to_e4m3(x ^ flip ^ 0x88888888u);  // takes two's complement
  const auto b = cuda::int4e4m3::int4x8_to_e5m2(x, flip);
  e4m3[2 * h] = a.lo;
  e4m3[2 * h + 1] = a.hi;
  e5m2[2 * h] = b.lo;
  e5m2[2 * h + 1] = b.hi;
}

TEST(Int4Fp8Device, MatchesTheHostFunctions) {
  FMOE_REQUIRE_GPU();
  for (uint32_t flip : {0u, 0x88888888u}) {  // flip: the e5m2 decode's to_biased
    DeviceBuffer d4(65536 * 8), d5(65536 * 8);
    decode_kernel<<<256, 256>>>(flip, static_cast<uint32_t*>(d4.get()), static_cast<uint32_t*>(d5.get()));
    FMOE_CUDA(cudaGetLastError());
    FMOE_CUDA(cudaDeviceSynchronize());
    std::vector<uint32_t> g4(65536 * 2), g5(65536 * 2);
    d4.download(g4.data(), g4.size() * 4);
    d5.download(g5.data(), g5.size() * 4);
    int bad = 0;
    for (uint32_t h = 0; h < 65536 && bad < 5; ++h) {
      const uint32_t x = word_of(h);
      const auto a = cuda::int4e4m3::int4x8_to_e4m3(x ^ flip ^ 0x88888888u);
      const auto b = cuda::int4e4m3::int4x8_to_e5m2(x, flip);
      if (g4[2 * h] != a.lo || g4[2 * h + 1] != a.hi)
        ADD_FAILURE() << "e4m3 flip " << std::hex << flip << " word " << x << ": device " << g4[2 * h] << " " << g4[2 * h + 1]
                      << ", host " << a.lo << " " << a.hi << (++bad, "");
      if (g5[2 * h] != b.lo || g5[2 * h + 1] != b.hi)
        ADD_FAILURE() << "e5m2 flip " << std::hex << flip << " word " << x << ": device " << g5[2 * h] << " " << g5[2 * h + 1]
                      << ", host " << b.lo << " " << b.hi << (++bad, "");
    }
    EXPECT_EQ(bad, 0);
  }
}

}  // namespace
}  // namespace fusedmoe::gputest
