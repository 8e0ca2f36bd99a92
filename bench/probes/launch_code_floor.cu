// Probe: what a one-kernel layer pays before its work under fusedmoe-bench's timing (L2 flushed by a read pass,
// then event, CUDA-graph launch, event), split into
//   launch    - an empty kernel, normal and cooperative launch (132 x 512 threads);
//   barrier   - one grid-wide barrier: cooperative_groups' grid.sync() against a lighter hand-rolled one
//               (one atom.add.release per CTA, the generation read from the old value so graph replays need no
//               reset, polled with ld.acquire);
//   code      - kernels whose code is N straight-line FFMAs (8 chains, 16 bytes per instruction) run cold (after the
//               flush: the code comes from DRAM) and warm (no flush: the code is in L2), against a loop with the same
//               instruction count and a small body: the cost of fetching cold code, per KB.
// Build: nvcc -O3 -arch=sm_90a -o launch_code_floor bench/probes/launch_code_floor.cu
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

__global__ void flush_kernel(const uint4* __restrict__ p, int64_t n, uint32_t* sink) {
  uint32_t acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcg(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

__global__ void empty_kernel(int) {}

__global__ void cg_barrier_kernel(float* out) {
  cooperative_groups::this_grid().sync();
  if (threadIdx.x == 0) out[blockIdx.x] = 1.0f;
}

// Hand-rolled grid barrier: every CTA adds 1; the old value's generation (old / gridDim.x) gives the count to wait
// for, so the word needs no reset between launches (it must start at a multiple of gridDim.x).
__global__ void light_barrier_kernel(unsigned int* counter, float* out) {
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned int old;
    asm volatile("atom.add.release.gpu.u32 %0, [%1], 1;" : "=r"(old) : "l"(counter) : "memory");
    const unsigned int target = (old / gridDim.x + 1) * gridDim.x;
    unsigned int v;
    do {
      asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(counter) : "memory");
    } while (static_cast<int>(v - target) < 0);
  }
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = 1.0f;
}

// N FFMAs in straight-line code (unique immediates, so nothing folds).
template <int N>
__global__ void straight_kernel(float* out, float a) {
  float x[8];
#pragma unroll
  for (int c = 0; c < 8; ++c) x[c] = threadIdx.x + c;
#pragma unroll
  for (int i = 0; i < N / 8; ++i)
#pragma unroll
    for (int c = 0; c < 8; ++c) x[c] = fmaf(x[c], a, static_cast<float>(i * 8 + c + 1));
  float s = 0;
#pragma unroll
  for (int c = 0; c < 8; ++c) s += x[c];
  if (s == 1234.5f) out[blockIdx.x] = s;
}
// The same FFMA count through a small loop body.
__global__ void loop_kernel(float* out, float a, int n) {
  float x[8];
#pragma unroll
  for (int c = 0; c < 8; ++c) x[c] = threadIdx.x + c;
#pragma unroll 4
  for (int i = 0; i < n / 8; ++i)
#pragma unroll
    for (int c = 0; c < 8; ++c) x[c] = fmaf(x[c], a, static_cast<float>(i * 8 + c + 1));
  float s = 0;
#pragma unroll
  for (int c = 0; c < 8; ++c) s += x[c];
  if (s == 1234.5f) out[blockIdx.x] = s;
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 200;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t flush_bytes = int64_t(256) << 20;
  uint4* flush; uint32_t* sink; unsigned int* counter; float* out;
  CK(cudaMalloc(&flush, flush_bytes)); CK(cudaMemset(flush, 1, flush_bytes)); CK(cudaMalloc(&sink, 4));
  CK(cudaMalloc(&counter, 4)); CK(cudaMemset(counter, 0, 4));
  CK(cudaMalloc(&out, sms * 4 * 16));
  cudaStream_t st; CK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));

  // Times one launch form under graph replay: flushed (cold) or not (warm).
  auto time_it = [&](const char* name, bool flushed, const std::function<void()>& launch) {
    cudaGraph_t g; cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    launch();
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    std::vector<float> t;
    for (int r = 0; r < reps + 10; ++r) {
      if (flushed) flush_kernel<<<sms * 4, 1024, 0, st>>>(flush, flush_bytes / 16, sink);
      CK(cudaEventRecord(e0, st));
      CK(cudaGraphLaunch(ge, st));
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      float ms = 0; CK(cudaEventElapsedTime(&ms, e0, e1));
      if (r >= 10) t.push_back(ms * 1000.0f);
    }
    std::sort(t.begin(), t.end());
    printf("  %-34s %-5s median %7.2f us  p10 %7.2f  p90 %7.2f\n", name, flushed ? "cold" : "warm", t[t.size() / 2],
           t[t.size() / 10], t[t.size() * 9 / 10]);
    CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
  };
  auto coop_cfg = [&](cudaLaunchAttribute* attr, int threads) {
    attr[0].id = cudaLaunchAttributeCooperative; attr[0].val.cooperative = 1;
    cudaLaunchConfig_t cfg{}; cfg.gridDim = dim3(sms); cfg.blockDim = dim3(threads); cfg.stream = st; cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cfg;
  };
  printf("launch and barrier (%d CTAs x 512 threads)\n", sms);
  for (bool fl : {true, false}) {
    time_it("empty, normal launch", fl, [&] { empty_kernel<<<sms, 512, 0, st>>>(0); });
    time_it("empty, cooperative launch", fl, [&] {
      cudaLaunchAttribute a[1]; cudaLaunchConfig_t c = coop_cfg(a, 512); CK(cudaLaunchKernelEx(&c, empty_kernel, 0)); });
    time_it("cooperative_groups grid.sync", fl, [&] {
      cudaLaunchAttribute a[1]; cudaLaunchConfig_t c = coop_cfg(a, 512); CK(cudaLaunchKernelEx(&c, cg_barrier_kernel, out)); });
    time_it("light barrier (cooperative launch)", fl, [&] {
      cudaLaunchAttribute a[1]; cudaLaunchConfig_t c = coop_cfg(a, 512);
      CK(cudaLaunchKernelEx(&c, light_barrier_kernel, counter, out)); });
  }
  printf("code fetch (%d CTAs x 128 threads; straight-line code of N FFMAs = 16 N bytes, against a loop)\n", sms);
  for (bool fl : {true, false}) {
    time_it("straight 1024 (16 KB)", fl, [&] { straight_kernel<1024><<<sms, 128, 0, st>>>(out, 0.999f); });
    time_it("loop 1024", fl, [&] { loop_kernel<<<sms, 128, 0, st>>>(out, 0.999f, 1024); });
    time_it("straight 4096 (64 KB)", fl, [&] { straight_kernel<4096><<<sms, 128, 0, st>>>(out, 0.999f); });
    time_it("loop 4096", fl, [&] { loop_kernel<<<sms, 128, 0, st>>>(out, 0.999f, 4096); });
    time_it("straight 16384 (256 KB)", fl, [&] { straight_kernel<16384><<<sms, 128, 0, st>>>(out, 0.999f); });
    time_it("loop 16384", fl, [&] { loop_kernel<<<sms, 128, 0, st>>>(out, 0.999f, 16384); });
  }
  return 0;
}
