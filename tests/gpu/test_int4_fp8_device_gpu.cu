// The int4 -> e5m2 decode of the W4A8 wgmma kernel and the mma kernel's fp16 pairs (src/cuda/int4_fp8.cuh)
// run on the device and compared bit for bit with the same functions on the host (whose prmt / fp16 emulations the CPU
// test tests/cpu/test_int4_fp8.cpp checks against the integers): every 16-bit half-word pattern
// in both halves, both storage forms.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "cuda/int4_fp8.cuh"
#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

__host__ __device__ uint32_t word_of(uint32_t h) { return h | (((h * 40503u) & 0xFFFFu) << 16); }

__global__ void decode_kernel(uint32_t to_biased, uint32_t* e5m2) {
  const uint32_t h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= 65536u) return;
  const auto b = cuda::int4fp8::int4x8_to_e5m2(word_of(h), to_biased);
  e5m2[2 * h] = b.lo;
  e5m2[2 * h + 1] = b.hi;
}

TEST(Int4Fp8Device, MatchesTheHostFunction) {
  FMOE_REQUIRE_GPU();
  for (uint32_t to_biased : {0u, 0x88888888u}) {
    DeviceBuffer d5(65536 * 8);
    decode_kernel<<<256, 256>>>(to_biased, static_cast<uint32_t*>(d5.get()));
    FMOE_CUDA(cudaGetLastError());
    FMOE_CUDA(cudaDeviceSynchronize());
    std::vector<uint32_t> g5(65536 * 2);
    d5.download(g5.data(), g5.size() * 4);
    int bad = 0;
    for (uint32_t h = 0; h < 65536 && bad < 5; ++h) {
      const uint32_t x = word_of(h);
      const auto b = cuda::int4fp8::int4x8_to_e5m2(x, to_biased);
      if (g5[2 * h] != b.lo || g5[2 * h + 1] != b.hi)
        ADD_FAILURE() << "to_biased " << std::hex << to_biased << " word " << x << ": device " << g5[2 * h] << " "
                      << g5[2 * h + 1] << ", host " << b.lo << " " << b.hi << (++bad, "");
    }
    EXPECT_EQ(bad, 0);
  }
}

__global__ void pairs_kernel(uint32_t to_biased, uint32_t* f16) {
  const uint32_t h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= 65536u) return;
  uint32_t q[4];
  cuda::int4fp8::int4x8_to_f16_pairs(word_of(h), to_biased, q);
  for (int i = 0; i < 4; ++i) f16[4 * h + i] = q[i];
}

// The fp16 pairs (the mma kernel's int4 operand) the same way.
TEST(Int4Fp8Device, F16PairsMatchTheHostFunction) {
  FMOE_REQUIRE_GPU();
  for (uint32_t to_biased : {0u, 0x88888888u}) {
    DeviceBuffer d(65536 * 16);
    pairs_kernel<<<256, 256>>>(to_biased, static_cast<uint32_t*>(d.get()));
    FMOE_CUDA(cudaGetLastError());
    FMOE_CUDA(cudaDeviceSynchronize());
    std::vector<uint32_t> g(65536 * 4);
    d.download(g.data(), g.size() * 4);
    int bad = 0;
    for (uint32_t h = 0; h < 65536 && bad < 5; ++h) {
      uint32_t q[4];
      cuda::int4fp8::int4x8_to_f16_pairs(word_of(h), to_biased, q);
      for (int i = 0; i < 4; ++i)
        if (g[4 * h + i] != q[i])
          ADD_FAILURE() << "to_biased " << std::hex << to_biased << " word " << word_of(h) << " pair " << i
                        << ": device " << g[4 * h + i] << ", host " << q[i] << (++bad, "");
    }
    EXPECT_EQ(bad, 0);
  }
}

}  // namespace
}  // namespace fusedmoe::gputest
