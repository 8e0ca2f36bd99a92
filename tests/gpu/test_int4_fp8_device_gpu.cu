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

// The words a decode writes for half-word pattern h: the e5m2 codes (lo, hi; kPairs false) or the four fp16 pairs.
template <bool kPairs>
__host__ __device__ void decode_words(uint32_t h, uint32_t to_biased, uint32_t (&out)[4]) {
  if constexpr (kPairs) {
    cuda::int4fp8::int4x8_to_f16_pairs(word_of(h), to_biased, out);
  } else {
    const auto b = cuda::int4fp8::int4x8_to_e5m2(word_of(h), to_biased);
    out[0] = b.lo, out[1] = b.hi, out[2] = out[3] = 0u;
  }
}

template <bool kPairs>
__global__ void decode_kernel(uint32_t to_biased, uint32_t* out) {
  const uint32_t h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= 65536u) return;
  uint32_t w[4];
  decode_words<kPairs>(h, to_biased, w);
  for (int i = 0; i < 4; ++i) out[4 * h + i] = w[i];
}

// Every half-word pattern, both storage forms: the device's words equal the host's.
template <bool kPairs>
void expect_device_equals_host() {
  for (uint32_t to_biased : {0u, 0x88888888u}) {
    DeviceBuffer d(65536 * 16);
    decode_kernel<kPairs><<<256, 256>>>(to_biased, static_cast<uint32_t*>(d.get()));
    FMOE_CUDA(cudaGetLastError());
    FMOE_CUDA(cudaDeviceSynchronize());
    std::vector<uint32_t> g(65536 * 4);
    d.download(g.data(), g.size() * 4);
    int bad = 0;
    for (uint32_t h = 0; h < 65536 && bad < 5; ++h) {
      uint32_t w[4];
      decode_words<kPairs>(h, to_biased, w);
      for (int i = 0; i < 4; ++i)
        if (g[4 * h + i] != w[i])
          ADD_FAILURE() << "to_biased " << std::hex << to_biased << " word " << word_of(h) << " output " << i
                        << ": device " << g[4 * h + i] << ", host " << w[i] << (++bad, "");
    }
    EXPECT_EQ(bad, 0);
  }
}

TEST(Int4Fp8Device, MatchesTheHostFunction) {
  FMOE_REQUIRE_GPU();
  expect_device_equals_host<false>();
}

// The fp16 pairs (the mma kernel's int4 operand) the same way.
TEST(Int4Fp8Device, F16PairsMatchTheHostFunction) {
  FMOE_REQUIRE_GPU();
  expect_device_equals_host<true>();
}

}  // namespace
}  // namespace fusedmoe::gputest
