// Probe: how fast can one CTA per SM stream the one-token layer's GEMM1 weights?
//
// The one-token layer kernel (src/cuda/decode_layer.cu) reads GEMM1's weights at ~2.2 TB/s in
// rounds of register loads (a task = the 8 gate + 8 up rows of 8 outputs, 8 warps splitting k, one
// half-barrier per task), and more bytes in flight per SM did not make it faster. This probe times
// the same bytes (the experts of one token, the same task order) read three ways, with the L2
// flushed before every rep:
//   regs  - the kernel's pattern: per half of 8 warps, a task's 16 rows loaded 16 bytes per lane,
//           kUnroll k-blocks in flight per warp, then a half barrier;
//   bulk  - a producer thread per CTA copies each task's gate and up rows (two contiguous runs)
//           into a ring of shared-memory stages with cp.async.bulk; 16 consumer warps read them;
//   flat  - the same bytes as one contiguous share per CTA, register loads, 8 in flight per lane
//           (how the HBM read ceiling is measured): the upper bound for this much data;
//   regs nobar / rowmajor - the regs tasks without the half barrier, and each task's rows read as
//           512 contiguous bytes per warp load (with and without the barrier).
// With --w2 the W2 bytes of the same experts are copied by bulk copies concurrently (the layer
// reads them during GEMM1 into shared memory).
//
// Built as build/tools/probes/decode_stream_probe (tools/probes/CMakeLists.txt), or by hand:
//   nvcc -O3 -std=c++17 -arch=sm_90a -I src tools/probes/decode_stream_probe.cu -o decode_stream_probe
// Run:   ./decode_stream_probe [K] [N] [topk] [stages]   (defaults: Qwen3-30B-A3B fp8, 2048 768 8 4)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda/mbarrier.cuh"

using namespace fusedmoe::cuda;

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

struct Shape {
  int64_t K, N, topk;  // fp8: one byte per weight
  const int* experts;  // [topk] expert of each slot
  const uint8_t* w13;  // [E][2N][K], halves layout (gate rows 0..N-1, up rows N..2N-1)
  const uint8_t* w2;   // [E][K][N]
};

__device__ __forceinline__ uint4 ld_stream(const uint8_t* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t fold(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

// The W2 slices of the CTA's columns (as the layer: after the first task, thread 0).
__device__ void issue_w2(const Shape& s, uint8_t* dst, uint64_t* bar) {
  const int64_t cols = (s.K + gridDim.x - 1) / gridDim.x, c0 = blockIdx.x * cols;
  const int64_t nc = cols < s.K - c0 ? cols : s.K - c0;
  if (nc <= 0) {
    mbar_expect_tx(bar, 0);
    return;
  }
  const uint32_t bytes = static_cast<uint32_t>(nc * s.N);
  mbar_expect_tx(bar, bytes * static_cast<uint32_t>(s.topk));
  for (int i = 0; i < s.topk; ++i)
    bulk_load_1d(dst + i * cols * s.N, s.w2 + (static_cast<int64_t>(s.experts[i]) * s.K + c0) * s.N, bytes, bar);
}

constexpr int kOuts = 8, kHalfWarps = 8, kUnroll = 4;

// regs: decode_layer.cu's GEMM1 tasks (512 threads, two halves of 8 warps), with the layer's lane
// mapping (kRowMajor = false: a warp load is 8 rows x 64 bytes, the mma.sync fragment's rows) or
// each task's 32 KB read as one run of 16-byte chunks by the half's 256 threads (kRowMajor: 512
// contiguous bytes per warp load), with or without the half barrier per task; w2: thread 0 issues
// the W2 slices after its first task, as the layer.
template <bool kRowMajor, bool kBarrier>
__global__ void __launch_bounds__(512, 1) regs_kernel(Shape s, bool w2, uint32_t* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ __align__(8) uint64_t w2_bar;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int half = warp / kHalfWarps, hw = warp % kHalfWarps, ht = tid % 256;
  if (tid == 0) mbar_init(&w2_bar, 1);
  __syncthreads();
  const int64_t blocks = s.N / kOuts, tasks = s.topk * blocks, kblocks = s.K / 64;
  uint32_t acc = 0;
  bool issued = false;
  for (int64_t task = blockIdx.x * 2 + half; task < tasks; task += gridDim.x * 2) {
    const int64_t e = s.experts[task / blocks], n0 = (task % blocks) * kOuts;
    if constexpr (kRowMajor) {
      // gate rows n0..n0+7 then up rows: two contiguous 8 x K runs.
      const uint8_t* gate = s.w13 + (e * 2 * s.N + n0) * s.K;
      const uint8_t* up = s.w13 + (e * 2 * s.N + s.N + n0) * s.K;
      const int64_t chunks = kOuts * s.K / 16;  // per half-run
      for (int64_t c = ht; c < chunks; c += 256 * kUnroll) {
        uint4 a[kUnroll], b[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int64_t cc = c + u * 256;
          a[u] = cc < chunks ? ld_stream(gate + cc * 16) : make_uint4(0, 0, 0, 0);
          b[u] = cc < chunks ? ld_stream(up + cc * 16) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) acc += fold(a[u]) ^ fold(b[u]);
      }
    } else {
      const int64_t n = n0 + g;
      const uint8_t* wg = s.w13 + (e * 2 * s.N + n) * s.K + 16 * t;
      const uint8_t* wu = s.w13 + (e * 2 * s.N + s.N + n) * s.K + 16 * t;
      for (int64_t kb = hw * kUnroll; kb < kblocks; kb += kHalfWarps * kUnroll) {
        uint4 a[kUnroll], b[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) a[u] = ld_stream(wg + (kb + u) * 64), b[u] = ld_stream(wu + (kb + u) * 64);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) acc += fold(a[u]) ^ fold(b[u]);
      }
    }
    if (w2 && tid == 0 && !issued) issue_w2(s, smem, &w2_bar), issued = true;
    if constexpr (kBarrier) asm volatile("bar.sync %0, %1;" ::"r"(1 + half), "r"(kHalfWarps * 32) : "memory");
  }
  if (w2 && tid == 0 && !issued) issue_w2(s, smem, &w2_bar);
  if (w2) mbar_wait(&w2_bar, 0);
  if (acc == 0x12345678u) sink[0] = acc;  // keeps the loads
}

// bulk: a producer thread fills a ring of task stages (gate rows, then up rows) with bulk copies;
// the 16 consumer warps each read a 1/16 of a stage and release it.
__global__ void __launch_bounds__(544, 1) bulk_kernel(Shape s, bool w2, int stages, uint32_t* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ __align__(8) uint64_t full[8], empty[8], w2_bar;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int64_t task_bytes = 2 * kOuts * s.K, blocks = s.N / kOuts, tasks = s.topk * blocks;
  uint8_t* ring = smem;
  uint8_t* w2s = smem + stages * task_bytes;
  if (tid == 0) {
    for (int i = 0; i < stages; ++i) mbar_init(&full[i], 1), mbar_init(&empty[i], 16);
    mbar_init(&w2_bar, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int64_t mine = tasks > blockIdx.x ? (tasks - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  if (warp == 16) {  // producer
    if (lane == 0) {
      for (int64_t j = 0; j < mine; ++j) {
        const int st = static_cast<int>(j % stages);
        if (j >= stages) mbar_wait(&empty[st], static_cast<uint32_t>((j / stages - 1) & 1));
        const int64_t task = blockIdx.x + j * gridDim.x;
        const int64_t e = s.experts[task / blocks], n0 = (task % blocks) * kOuts;
        const uint32_t half_bytes = static_cast<uint32_t>(kOuts * s.K);
        mbar_expect_tx(&full[st], 2 * half_bytes);
        bulk_load_1d(ring + st * task_bytes, s.w13 + (e * 2 * s.N + n0) * s.K, half_bytes, &full[st]);
        bulk_load_1d(ring + st * task_bytes + half_bytes, s.w13 + (e * 2 * s.N + s.N + n0) * s.K, half_bytes,
                     &full[st]);
        if (w2 && j == 0) issue_w2(s, w2s, &w2_bar);
      }
      if (w2 && mine == 0) issue_w2(s, w2s, &w2_bar);
    }
  } else {
    uint32_t acc = 0;
    for (int64_t j = 0; j < mine; ++j) {
      const int st = static_cast<int>(j % stages);
      mbar_wait(&full[st], static_cast<uint32_t>((j / stages) & 1));
      const uint8_t* b = ring + st * task_bytes;
      for (int64_t o = (warp * 32 + lane) * 16; o < task_bytes; o += 512 * 16)
        acc += fold(*reinterpret_cast<const uint4*>(b + o));
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[st]);
    }
    if (w2 && tid == 0) mbar_wait(&w2_bar, 0);
    if (acc == 0x12345678u) sink[0] = acc;
  }
}

// flat: the same total bytes, a contiguous share per CTA, 8 x 16-byte loads in flight per lane.
__global__ void __launch_bounds__(512, 1) flat_kernel(const uint8_t* base, int64_t bytes, uint32_t* sink) {
  const int64_t share = (bytes / gridDim.x) & ~int64_t(8191);
  const uint8_t* p = base + blockIdx.x * share;
  uint32_t acc = 0;
  for (int64_t o = threadIdx.x * 16; o < share; o += 512 * 16 * 8) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = o + u * 8192 < share ? ld_stream(p + o + u * 8192) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < 8; ++u) acc += fold(v[u]);
  }
  if (acc == 0x12345678u) sink[0] = acc;
}

__global__ void flush_kernel(uint4* buf, int64_t n) {
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) buf[i].x += 1;
}

int main(int argc, char** argv) {
  const int64_t K = argc > 1 ? std::atoll(argv[1]) : 2048, N = argc > 2 ? std::atoll(argv[2]) : 768;
  const int64_t topk = argc > 3 ? std::atoll(argv[3]) : 8;
  const int stages = argc > 4 ? std::atoi(argv[4]) : 4;
  const int E = 64, reps = 50;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t w13_bytes = E * 2 * N * K, w2_bytes = E * K * N;
  uint8_t *w13, *w2;
  CK(cudaMalloc(&w13, w13_bytes));
  CK(cudaMalloc(&w2, w2_bytes));
  CK(cudaMemset(w13, 0x3c, w13_bytes));
  CK(cudaMemset(w2, 0x3c, w2_bytes));
  std::vector<int> ex(topk);
  for (int i = 0; i < topk; ++i) ex[i] = (i * 37 + 5) % E;
  int* d_ex;
  CK(cudaMalloc(&d_ex, topk * sizeof(int)));
  CK(cudaMemcpy(d_ex, ex.data(), topk * sizeof(int), cudaMemcpyHostToDevice));
  uint32_t* sink;
  CK(cudaMalloc(&sink, 64));
  const int64_t flush_n = (256ll << 20) / 16;
  uint4* flush;
  CK(cudaMalloc(&flush, flush_n * 16));
  CK(cudaMemset(flush, 0, flush_n * 16));
  Shape s{K, N, topk, d_ex, w13, w2};
  const int64_t cols = (K + sms - 1) / sms;
  const int64_t w2_smem = topk * cols * N;
  const int64_t g1 = topk * 2 * N * K;  // GEMM1 bytes of the token's experts
  CK(cudaFuncSetAttribute(regs_kernel<false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  CK(cudaFuncSetAttribute(bulk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 220 * 1024));
  const int64_t task_bytes = 2 * kOuts * K;
  // With the W2 slices resident, as many stages as still fit.
  const int stages_w2 = static_cast<int>(std::min<int64_t>(stages, (220 * 1024 - w2_smem) / task_bytes));
  const int64_t bulk_smem = stages_w2 * task_bytes + w2_smem;
  std::printf("K %lld N %lld topk %lld: GEMM1 %.2f MB, W2 %.2f MB, W2 smem %lld B/CTA, stages %d (%d with W2)\n",
              (long long)K, (long long)N, (long long)topk, g1 / 1e6, topk * K * N / 1e6, (long long)w2_smem, stages,
              stages_w2);
  if (stages < 1 || stages > 8 || stages * task_bytes > 220 * 1024) {
    std::fprintf(stderr, "stages: expected 1..8 and at most 220 KB of them, got %d\n", stages);
    return 2;
  }
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  auto time = [&](const char* name, double bytes, auto launch) {
    std::vector<float> ms;
    for (int r = 0; r < reps + 3; ++r) {
      flush_kernel<<<sms * 4, 512>>>(flush, flush_n);
      CK(cudaEventRecord(a));
      launch();
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      float t;
      CK(cudaEventElapsedTime(&t, a, b));
      if (r >= 3) ms.push_back(t);
    }
    CK(cudaGetLastError());
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2] * 1e3;
    std::printf("%-14s %8.2f us  %5.2f TB/s  (p10 %.2f p90 %.2f)\n", name, med, bytes / med / 1e6,
                ms[ms.size() / 10] * 1e3, ms[ms.size() * 9 / 10] * 1e3);
  };
  const double w2b = static_cast<double>(topk * K * N);
  time("flat g1", g1, [&] { flat_kernel<<<sms, 512>>>(w13, g1, sink); });
  time("flat g1+w2", g1 + w2b, [&] { flat_kernel<<<sms, 512>>>(w13, g1 + static_cast<int64_t>(w2b), sink); });
  time("regs g1", g1, [&] { regs_kernel<false, true><<<sms, 512, 0>>>(s, false, sink); });
  time("regs g1+w2", g1 + w2b, [&] { regs_kernel<false, true><<<sms, 512, w2_smem>>>(s, true, sink); });
  time("bulk g1", g1, [&] { bulk_kernel<<<sms, 544, stages * task_bytes>>>(s, false, stages, sink); });
  time("regs nobar", g1, [&] { regs_kernel<false, false><<<sms, 512>>>(s, false, sink); });
  time("rowmajor bar", g1, [&] { regs_kernel<true, true><<<sms, 512>>>(s, false, sink); });
  time("rowmajor nobar", g1, [&] { regs_kernel<true, false><<<sms, 512>>>(s, false, sink); });
  if (stages_w2 >= 1)
    time("bulk g1+w2", g1 + w2b, [&] { bulk_kernel<<<sms, 544, bulk_smem>>>(s, true, stages_w2, sink); });
  // An empty launch: the fixed cost every row above includes.
  time("empty", 1.0, [&] { flat_kernel<<<sms, 512>>>(w13, 0, sink); });
  return 0;
}
