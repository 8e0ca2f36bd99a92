// Probe: can GEMM2's y round trip stay in L2 if GEMM2 and the finalize run column slice by column slice?
//
// Traffic model of DeepSeek-V3 TP8 at 4096 tokens (fp8 W2, bf16 y): GEMM2 reads 470 MB of weights and
// writes y [32768 slots, 7168] bf16 (470 MB); the finalize reads y by slot and writes out [4096, 7168] bf16.
// A stand-in GEMM2 kernel streams the same bytes (weights read, y written); a stand-in finalize sums each
// token's 8 slot rows. Whole layer: one pass each. Sliced: for each 'slice' columns, the GEMM2 stand-in
// of that slice, then its finalize (y slice 32768 x slice x 2 bytes: 16.7 MB at 256 columns), optionally
// with discard.global.L2 on the y lines it has read (their dirty data never written back).
// Build: nvcc -O3 -arch=sm_90a -o y_l2_slices bench/probes/y_l2_slices.cu
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <random>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

constexpr int kSlots = 32768, kTokens = 4096, kTopk = 8, kCols = 7168;

// Weights of the slice: [kCols rows of 256 bytes] (fp8 W2 rows of K = 256); y[:, c0:c1] written from them.
// wb / wv: the weight bytes of the slice (all experts), as uint4.
template <bool kEvictFirst>
__global__ void gemm2_standin(const uint4* __restrict__ wb, int64_t wv, uint4* __restrict__ y, int c0, int c1) {
  uint32_t acc = 0;
  uint64_t pol = 0;
  if (kEvictFirst) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  const int64_t tid = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, nt = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = tid; i < wv; i += nt) {
    uint4 v;
    if (kEvictFirst)
      asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(wb + i), "l"(pol));
    else
      v = __ldg(wb + i);
    acc ^= v.x + v.y + v.z + v.w;
  }
  // y row stride kCols * 2 bytes = kCols / 8 uint4; the slice is (c1 - c0) / 8 uint4 per row
  const int per_row = (c1 - c0) / 8;
  const int64_t yv = static_cast<int64_t>(kSlots) * per_row;
  for (int64_t i = tid; i < yv; i += nt) {
    const int64_t r = i / per_row, c = i % per_row;
    uint4 o; o.x = acc + static_cast<uint32_t>(r); o.y = static_cast<uint32_t>(c); o.z = 0x3c003c00u; o.w = 0x3c003c00u;
    y[r * (kCols / 8) + c0 / 8 + c] = o;
  }
}

__device__ inline void discard_line(const void* p) {
  asm volatile("discard.global.L2 [%0], 128;" ::"l"(p) : "memory");
}

// One warp per token; lane l handles uint4 column chunks l, l + 32, ... of the slice.
template <bool kDiscard>
__global__ void finalize_standin(const uint4* __restrict__ y, const int* __restrict__ slot_row, uint4* __restrict__ out,
                                 int c0, int c1) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (warp >= kTokens) return;
  const int per_row = (c1 - c0) / 8;
  int rows[kTopk];
#pragma unroll
  for (int k = 0; k < kTopk; ++k) rows[k] = slot_row[warp * kTopk + k];
  for (int c = lane; c < per_row; c += 32) {
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
    for (int k = 0; k < kTopk; ++k) {
      const uint4* p = y + static_cast<int64_t>(rows[k]) * (kCols / 8) + c0 / 8 + c;
      uint4 v = *p;
      const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        s[2 * h] += __uint_as_float(u[h] << 16);
        s[2 * h + 1] += __uint_as_float(u[h] & 0xffff0000u);
      }
    }
    uint4 o;
    o.x = (__float_as_uint(s[0]) >> 16) | (__float_as_uint(s[1]) & 0xffff0000u);
    o.y = (__float_as_uint(s[2]) >> 16) | (__float_as_uint(s[3]) & 0xffff0000u);
    o.z = (__float_as_uint(s[4]) >> 16) | (__float_as_uint(s[5]) & 0xffff0000u);
    o.w = (__float_as_uint(s[6]) >> 16) | (__float_as_uint(s[7]) & 0xffff0000u);
    out[static_cast<int64_t>(warp) * (kCols / 8) + c0 / 8 + c] = o;
    if constexpr (kDiscard) {
      __syncwarp();
      if ((c & 7) == 0) {
#pragma unroll
        for (int k = 0; k < kTopk; ++k) discard_line(y + static_cast<int64_t>(rows[k]) * (kCols / 8) + c0 / 8 + c);
      }
    }
  }
}

__global__ void flush_kernel(uint4* f, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint4 v = f[i]; v.x += 1; f[i] = v;
  }
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t wbytes = size_t(kCols) * 256, ybytes = size_t(kSlots) * kCols * 2, obytes = size_t(kTokens) * kCols * 2;
  // weights: 256 experts' W2 = 256 x 7168 x 256 bytes (the layout: see gemm2 below)
  const int kExperts = 256;
  uint4 *w, *y, *out, *fl;
  int* slot_row;
  const int64_t fl_n = 256ll << 20 >> 4;  // 256 MB flush buffer
  CK(cudaMalloc(&w, wbytes * kExperts));
  CK(cudaMalloc(&y, ybytes));
  CK(cudaMalloc(&out, obytes));
  CK(cudaMalloc(&fl, fl_n * 16));
  CK(cudaMalloc(&slot_row, sizeof(int) * kSlots));
  CK(cudaMemset(w, 0x11, wbytes * kExperts));
  CK(cudaMemset(fl, 0, fl_n * 16));
  std::vector<int> perm(kSlots);
  for (int i = 0; i < kSlots; ++i) perm[i] = i;
  std::mt19937 rng(7);
  std::shuffle(perm.begin(), perm.end(), rng);
  CK(cudaMemcpy(slot_row, perm.data(), sizeof(int) * kSlots, cudaMemcpyHostToDevice));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int gblocks = sms * 4, gthreads = 256;
  const int fthreads = 256, fblocks = kTokens * 32 / fthreads;

  // Weights laid out slice-major: the weights of columns [c0, c1) of all experts are one span
  // (kExperts x (c1 - c0) x 256 bytes) - the bytes a column slice of GEMM2 reads.
  bool evict_first = false;
  auto gemm2 = [&](int c0, int c1) {
    const uint4* wb = w + static_cast<int64_t>(c0) * kExperts * 16;
    if (evict_first)
      gemm2_standin<true><<<gblocks, gthreads, 0, st>>>(wb, static_cast<int64_t>(c1 - c0) * kExperts * 16, y, c0, c1);
    else
      gemm2_standin<false><<<gblocks, gthreads, 0, st>>>(wb, static_cast<int64_t>(c1 - c0) * kExperts * 16, y, c0, c1);
  };
  auto fin = [&](int c0, int c1, bool discard) {
    if (discard) finalize_standin<true><<<fblocks, fthreads, 0, st>>>(y, slot_row, out, c0, c1);
    else finalize_standin<false><<<fblocks, fthreads, 0, st>>>(y, slot_row, out, c0, c1);
  };
  auto layer = [&](int slice, bool discard) {
    for (int c0 = 0; c0 < kCols; c0 += slice) {
      const int c1 = std::min(kCols, c0 + slice);
      gemm2(c0, c1);
      fin(c0, c1, discard);
    }
  };
  auto time_it = [&](const char* name, auto&& fn) {
    std::vector<float> t;
    for (int it = 0; it < 12; ++it) {
      flush_kernel<<<sms * 4, 256, 0, st>>>(fl, fl_n);
      CK(cudaEventRecord(e0, st));
      fn();
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (it >= 2) t.push_back(ms * 1000.f);
    }
    std::sort(t.begin(), t.end());
    printf("%-40s median %8.1f us  (min %8.1f, max %8.1f)\n", name, t[t.size() / 2], t.front(), t.back());
  };
  CK(cudaGetLastError());
  printf("device SMs %d; y %.1f MB, weights %.1f MB, out %.1f MB\n", sms, ybytes / 1e6, wbytes * kExperts / 1e6, obytes / 1e6);
  time_it("gemm2 stand-in only, whole", [&] { gemm2(0, kCols); });
  time_it("finalize stand-in only, whole", [&] { fin(0, kCols, false); });
  time_it("whole (1 slice)", [&] { layer(kCols, false); });
  for (int ef = 0; ef < 2; ++ef) {
    evict_first = ef == 1;
    printf("weights %s\n", ef ? "evict_first" : "plain");
    for (int sl : {1024, 512, 256}) {
      char n1[64], n2[64], n3[64], n4[64];
      snprintf(n1, sizeof n1, "slices of %d", sl);
      snprintf(n2, sizeof n2, "slices of %d + discard", sl);
      snprintf(n3, sizeof n3, "  gemm2 stand-in only, slices of %d", sl);
      snprintf(n4, sizeof n4, "  finalize stand-in only, slices of %d", sl);
      time_it(n1, [&] { layer(sl, false); });
      time_it(n2, [&] { layer(sl, true); });
      time_it(n3, [&] { for (int c0 = 0; c0 < kCols; c0 += sl) gemm2(c0, std::min(kCols, c0 + sl)); });
      time_it(n4, [&] { for (int c0 = 0; c0 < kCols; c0 += sl) fin(c0, std::min(kCols, c0 + sl), false); });
    }
  }
  // Finalize from L2: one slice written, then its finalize timed alone.
  for (int sl : {512, 256}) {
    std::vector<float> t;
    for (int it = 0; it < 10; ++it) {
      flush_kernel<<<sms * 4, 256, 0, st>>>(fl, fl_n);
      gemm2(0, sl);
      CK(cudaEventRecord(e0, st));
      fin(0, sl, false);
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      t.push_back(ms * 1000.f);
    }
    std::sort(t.begin(), t.end());
    printf("finalize of one %d slice right after its gemm2: %.1f us (x %d slices = %.1f)\n", sl, t[5], kCols / sl, t[5] * kCols / sl);
    t.clear();
    for (int it = 0; it < 10; ++it) {
      flush_kernel<<<sms * 4, 256, 0, st>>>(fl, fl_n);
      CK(cudaEventRecord(e0, st));
      fin(0, sl, false);
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      t.push_back(ms * 1000.f);
    }
    std::sort(t.begin(), t.end());
    printf("finalize of one %d slice after a flush: %.1f us\n", sl, t[5]);
  }
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  return 0;
}
