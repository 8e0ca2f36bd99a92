// Probe: the least time a one-kernel, one-token MoE layer can take on this GPU under the benchmark's timing
// (fusedmoe-bench: L2 flushed by a read pass before each rep, then event, CUDA-graph launch, event).
//
// Stand-ins with the bytes of Qwen3-30B-A3B (K = 2048, N = 768, top-8) and gpt-oss-120b (K = N = 2880,
// top-4) in MXFP4 (e2m1 + e8m0 scales), nothing computed:
//   empty     - an empty cooperative kernel (launch + graph + events),
//   stream    - every CTA streams its share of the GEMM1 rows of the top-k experts (16-byte loads, 8 in flight
//               per thread), and its W2 slice by one bulk copy into shared memory issued at the start,
//   barrier   - stream, then a grid-wide barrier (cooperative_groups), then one store per column (the shape of
//               decode_layer_w4.cu: GEMM1, grid barrier, GEMM2 from shared memory, top-k sum),
// so that "barrier" is a floor for that kernel before any decode, MMA or sum. Issue 6 asks 50% of the HBM
// roofline at one token: 12.8 us (Qwen3-30B-A3B) / 33.6 us (gpt-oss-120b) with the H100's 3.13 TB/s.
// Build: nvcc -O3 -arch=sm_90a -o one_token_floor bench/probes/one_token_floor.cu
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

struct Shape { const char* name; int K, N, topk; };

__global__ void flush_kernel(const uint4* __restrict__ p, int64_t n, uint32_t* sink) {
  uint32_t acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcg(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

__global__ void empty_kernel(int) {}

__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))), "l"(src), "r"(bytes),
               "r"(static_cast<uint32_t>(__cvta_generic_to_shared(bar))) : "memory");
}

// w13: the top-k experts' GEMM1 rows (bytes13 in all, uint4), w2: their W2 rows; each CTA: a contiguous share of
// w13, and w2's slice [blockIdx.x * slice, + slice) bytes.
template <bool kBarrier>
__global__ void __launch_bounds__(512, 1) stream_kernel(const uint4* __restrict__ w13, int64_t n13, const uint8_t* __restrict__ w2,
                                                        uint32_t slice, float* __restrict__ out) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ __align__(8) uint64_t bar;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(&bar))));
    asm volatile("fence.mbarrier_init.release.cluster;");
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(&bar))), "r"(slice));
    bulk_load(smem, w2 + static_cast<int64_t>(blockIdx.x) * slice, slice, &bar);
  }
  const int64_t per = (n13 + gridDim.x - 1) / gridDim.x, b0 = blockIdx.x * per, b1 = min(n13, b0 + per);
  uint32_t acc = 0;
  for (int64_t i = b0 + threadIdx.x; i < b1; i += 8 * int64_t(blockDim.x)) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = i + u * int64_t(blockDim.x) < b1 ? __ldcs(w13 + i + u * int64_t(blockDim.x)) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < 8; ++u) acc ^= v[u].x + v[u].y + v[u].z + v[u].w;
  }
  __syncthreads();
  if (kBarrier) cooperative_groups::this_grid().sync();
  // W2 slice landed (phase 0)
  asm volatile("{\n.reg .pred p;\nW: mbarrier.try_wait.parity.shared.b64 p, [%0], 0;\n@!p bra W;\n}\n"
               ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(&bar))) : "memory");
  if (threadIdx.x < 16) out[blockIdx.x * 16 + threadIdx.x] = static_cast<float>(acc ^ smem[threadIdx.x]);
}

static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main(int argc, char** argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 300;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t flush_bytes = int64_t(256) << 20;
  uint4* flush; uint32_t* sink;
  CK(cudaMalloc(&flush, flush_bytes)); CK(cudaMemset(flush, 1, flush_bytes)); CK(cudaMalloc(&sink, 4));
  float* out; CK(cudaMalloc(&out, sms * 16 * 4));
  cudaStream_t st; CK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  const Shape shapes[] = {{"qwen3-30b-a3b", 2048, 768, 8}, {"gpt-oss-120b", 2880, 2880, 4}};
  for (const Shape& s : shapes) {
    // MXFP4: half a byte per weight, one e8m0 byte per 32.
    const int64_t w13 = int64_t(s.topk) * 2 * s.N * s.K / 2 + int64_t(s.topk) * 2 * s.N * (s.K / 32);
    const int64_t w2 = int64_t(s.topk) * s.K * s.N / 2 + int64_t(s.topk) * s.K * (s.N / 32);
    const uint32_t slice = static_cast<uint32_t>((w2 / sms + 15) / 16 * 16);
    uint8_t *d13, *d2;
    CK(cudaMalloc(&d13, w13 + 64)); CK(cudaMalloc(&d2, int64_t(slice) * sms + 64));
    CK(cudaMemset(d13, 3, w13 + 64)); CK(cudaMemset(d2, 5, int64_t(slice) * sms + 64));
    const int64_t n13 = w13 / 16;
    CK(cudaFuncSetAttribute(stream_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, slice));
    CK(cudaFuncSetAttribute(stream_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, slice));
    const double bytes = double(w13 + w2);
    printf("%s: %.2f MB (GEMM1 rows %.2f, W2 %.2f), roofline at 3.13 TB/s %.2f us, 50%% %.2f us\n", s.name, bytes / 1e6,
           w13 / 1e6, w2 / 1e6, bytes / 3.13e6, 2 * bytes / 3.13e6);
    for (int variant = 0; variant < 3; ++variant) {
      const char* vname = variant == 0 ? "empty" : variant == 1 ? "stream" : "barrier";
      cudaGraph_t g; cudaGraphExec_t ge;
      CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeCooperative; attr[0].val.cooperative = 1;
      cudaLaunchConfig_t cfg{}; cfg.gridDim = dim3(sms); cfg.blockDim = dim3(512); cfg.stream = st; cfg.attrs = attr; cfg.numAttrs = 1;
      if (variant == 0) { CK(cudaLaunchKernelEx(&cfg, empty_kernel, 0)); }
      else {
        cfg.dynamicSmemBytes = slice;
        if (variant == 1) CK(cudaLaunchKernelEx(&cfg, stream_kernel<false>, (const uint4*)d13, n13, (const uint8_t*)d2, slice, out));
        else CK(cudaLaunchKernelEx(&cfg, stream_kernel<true>, (const uint4*)d13, n13, (const uint8_t*)d2, slice, out));
      }
      CK(cudaStreamEndCapture(st, &g));
      CK(cudaGraphInstantiate(&ge, g, 0));
      std::vector<float> t;
      for (int r = 0; r < reps + 10; ++r) {
        flush_kernel<<<sms * 4, 1024, 0, st>>>(flush, flush_bytes / 16, sink);
        CK(cudaEventRecord(e0, st));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms = 0; CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 10) t.push_back(ms * 1000.0f);
      }
      std::vector<float> s2 = t; std::sort(s2.begin(), s2.end());
      printf("  %-8s median %6.2f us  p10 %6.2f  p90 %6.2f  (%d reps)\n", vname, median(t), s2[s2.size() / 10], s2[s2.size() * 9 / 10], reps);
      CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
    }
    CK(cudaFree(d13)); CK(cudaFree(d2));
  }
  return 0;
}
