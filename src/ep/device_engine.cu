// The device engine: route / pack / combine as CUDA kernels on the caller's stream (no host
// synchronisation except download_sync, which EXACT mode calls once per layer call). Same Plan and
// same results as the host engine (host_engine.cpp), which the CPU tests check end to end.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstring>
#include <vector>
#include <string>

#include "ep/ep_internal.hpp"
#include "fusedmoe/error.hpp"

namespace fusedmoe::ep {
namespace {

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string("fusedmoe EP (CUDA): ") + what + ": " + cudaGetErrorString(e));
}
#define FMOE_EP_LAUNCH_CHECK() cuda_ok(cudaGetLastError(), "kernel launch")

__device__ __forceinline__ float load_x(DType dt, const void* base, int64_t i) {
  if (dt == DType::F32) return static_cast<const float*>(base)[i];
  if (dt == DType::BF16) return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
  return __half2float(static_cast<const __half*>(base)[i]);
}
__device__ __forceinline__ void store_x(DType dt, void* base, int64_t i, float v) {
  if (dt == DType::F32)
    static_cast<float*>(base)[i] = v;
  else if (dt == DType::BF16)
    static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v);
  else
    static_cast<__half*>(base)[i] = __float2half_rn(v);
}

constexpr int kRouteThreads = 1024;
constexpr int kMaxWorld = kMaxDeviceWorld;

// One block per destination rank d: pos[t, d] = number of earlier tokens going to d (or -1),
// counts[d] = tokens going to d. A block-wide exclusive scan over chunks of kRouteThreads tokens.
__global__ void route_kernel(Plan p) {
  const int d = blockIdx.x;
  __shared__ int warp_sums[kRouteThreads / 32];
  __shared__ int base_s;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (threadIdx.x == 0) base_s = 0;
  __syncthreads();
  for (int64_t start = 0; start < p.M; start += kRouteThreads) {
    const int64_t t = start + threadIdx.x;
    const bool flag = t < p.M && token_goes_to(p, t, d);
    const unsigned ballot = __ballot_sync(0xffffffffu, flag);
    const int lane_prefix = __popc(ballot & ((1u << lane) - 1u));
    if (lane == 0) warp_sums[warp] = __popc(ballot);
    __syncthreads();
    if (warp == 0) {
      int v = lane < kRouteThreads / 32 ? warp_sums[lane] : 0;
      // inclusive scan over the warp totals
      for (int o = 1; o < 32; o <<= 1) {
        const int n = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += n;
      }
      if (lane < kRouteThreads / 32) warp_sums[lane] = v;
    }
    __syncthreads();
    const int warp_prefix = warp == 0 ? 0 : warp_sums[warp - 1];
    const int base = base_s;
    if (t < p.M) p.pos[t * p.world + d] = flag ? base + warp_prefix + lane_prefix : -1;
    __syncthreads();
    if (threadIdx.x == 0) base_s = base + warp_sums[kRouteThreads / 32 - 1];
    __syncthreads();
  }
  if (threadIdx.x == 0) p.send_counts[d] = base_s;
}

constexpr int kPackThreads = 256;

__device__ __forceinline__ float round_up_pow2_dev(float s) {
  // s is a positive normal float here (>= 1e-10 / 448): next power of two unless it is one.
  unsigned b = __float_as_uint(s);
  if (b & 0x7fffffu) b = (b & 0xff800000u) + 0x00800000u;
  return __uint_as_float(b);
}

// One block per token: copy (or quantise) its row into the block of every destination it goes
// to, with its ids and weights.
__global__ void pack_kernel(Plan p, bool vec16) {
  const int64_t t = blockIdx.x;
  const int64_t K = p.K;
  for (int d = 0; d < p.world; ++d) {
    const int32_t pos = p.pos[t * p.world + d];
    if (pos < 0) continue;
    const int64_t r = block_offset(p, p.send_counts, d) + pos;
    for (int64_t j = threadIdx.x; j < p.topk; j += blockDim.x) {
      p.send_ids[r * p.topk + j] = p.ids[t * p.topk + j];
      p.send_w[r * p.topk + j] = p.weights[t * p.topk + j];
    }
    if (p.fp8) {
      // One warp per 1x128 group: s = max(amax, 1e-10) / 448 (UE8M0: rounded up to 2^k),
      // q = e4m3_satfinite(x / s): the steps of quantize_fp8_per_token_group / the layer's own.
      const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
      const int64_t groups = p.groups();
      uint8_t* q = static_cast<uint8_t*>(p.send_x) + r * K;
      for (int64_t g = warp; g < groups; g += nwarps) {
        const int64_t k0 = g * 128, k1 = k0 + 128 < K ? k0 + 128 : K;
        float amax = 0.0f;
        for (int64_t k = k0 + lane; k < k1; k += 32) {
          const float v = load_x(p.x_dtype, p.x, t * K + k);
          amax = fmaxf(amax, v == v ? fabsf(v) : 0.0f);  // NaN skipped, as the quantisers
        }
        for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        float s = __fdiv_rn(fmaxf(amax, 1e-10f), 448.0f);
        if (p.ue8m0) s = round_up_pow2_dev(s);
        for (int64_t k = k0 + lane; k < k1; k += 32)
          q[k] = static_cast<uint8_t>(
              __nv_cvt_float_to_fp8(__fdiv_rn(load_x(p.x_dtype, p.x, t * K + k), s), __NV_SATFINITE, __NV_E4M3));
        if (lane == 0) p.send_scale[r * groups + g] = s;
      }
    } else {
      const size_t rb = static_cast<size_t>(K) * (p.x_dtype == DType::F32 ? 4 : 2);
      const uint8_t* src = static_cast<const uint8_t*>(p.x) + t * rb;
      uint8_t* dst = static_cast<uint8_t*>(p.send_x) + r * rb;
      if (vec16) {
        const uint4* s4 = reinterpret_cast<const uint4*>(src);
        uint4* d4 = reinterpret_cast<uint4*>(dst);
        for (size_t j = threadIdx.x; j < rb / 16; j += blockDim.x) d4[j] = s4[j];
      } else {
        for (size_t j = threadIdx.x; j < rb; j += blockDim.x) dst[j] = src[j];
      }
    }
  }
}

// PADDED mode: the rows of each destination block past its count select nothing.
__global__ void pad_kernel(Plan p) {
  const int64_t n = p.send_capacity * p.topk;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / p.topk;
    const int d = static_cast<int>(r / p.max_tokens);
    if (r - d * p.max_tokens >= p.send_counts[d]) {
      p.send_ids[i] = -1;
      p.send_w[i] = 0.0f;
    }
  }
}

// One block per token: the sum of its partial rows in ascending rank order (fp32), in the output
// dtype. -0 is the identity (keeps a lone -0 partial); a token with no expert anywhere gets +0.
// VEC: elements per thread and step through 16-byte loads (8 for 16-bit rows, 4 for F32), or 1.
template <int VEC>
__global__ void combine_kernel(Plan p) {
  const int64_t t = blockIdx.x;
  const int64_t K = p.K;
  __shared__ int64_t rows[kMaxWorld];  // partial row of each rank, -1 = none
  __shared__ int hits_s;
  if (threadIdx.x == 0) {
    int h = 0;
    for (int d = 0; d < p.world; ++d) {
      const int32_t pos = p.pos[t * p.world + d];
      rows[d] = pos < 0 ? -1 : block_offset(p, p.send_counts, d) + pos;
      h += pos >= 0;
    }
    hits_s = h;
  }
  __syncthreads();
  const int hits = hits_s;
  for (int64_t k0 = static_cast<int64_t>(threadIdx.x) * VEC; k0 < K; k0 += static_cast<int64_t>(blockDim.x) * VEC) {
    float acc[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) acc[j] = -0.0f;
    for (int d = 0; d < p.world; ++d) {
      const int64_t r = rows[d];
      if (r < 0) continue;
      if constexpr (VEC == 1) {
        acc[0] += load_x(p.x_dtype, p.combine_recv, r * K + k0);
      } else {
        const uint4 v = *reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(p.combine_recv) +
                                                        (r * K + k0) * (VEC == 8 ? 2 : 4));
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          if constexpr (VEC == 4) {
            acc[j] += __uint_as_float(w[j]);
          } else {
            const uint16_t b = static_cast<uint16_t>(j % 2 ? w[j / 2] >> 16 : w[j / 2] & 0xffffu);
            acc[j] += p.x_dtype == DType::BF16 ? __bfloat162float(__ushort_as_bfloat16(b))
                                               : __half2float(__ushort_as_half(b));
          }
        }
      }
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) store_x(p.x_dtype, p.out, t * K + k0 + j, hits ? acc[j] : 0.0f);
  }
}

// Kernels and copies go to the rank's device whatever the calling thread's current device is.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    cudaGetDevice(&prev_);
    if (prev_ != device)
      cuda_ok(cudaSetDevice(device), "cudaSetDevice");
    else
      prev_ = -1;
  }
  ~DeviceGuard() {
    if (prev_ >= 0) cudaSetDevice(prev_);
  }

 private:
  int prev_ = -1;
};

class DeviceEngine final : public Engine {
 public:
  explicit DeviceEngine(int device) : device_(device) {
    cuda_ok(cudaSetDevice(device_), "cudaSetDevice");
    // Pageable, not cudaMallocHost: freeing pinned memory synchronises every device of the
    // process, and with one thread per GPU a rank destroying its layer while a peer already sat in
    // the next collective (spinning on this rank) deadlocked (seen on 2 H200s, 2026-11-21). A
    // D2H copy into pageable memory returns once the copy is done: the counts are a few bytes.
    staging_.resize(kPinnedBytes);
  }
  void* alloc(size_t bytes) override {
    DeviceGuard guard(device_);
    void* p = nullptr;
    cuda_ok(cudaMalloc(&p, bytes ? bytes : 16), ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str());
    cuda_ok(cudaMemset(p, 0, bytes ? bytes : 16), "cudaMemset");
    return p;
  }
  void release(void* p) override {
    DeviceGuard guard(device_);
    cudaFree(p);
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    DeviceGuard guard(device_);
    if (bytes) cuda_ok(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (upload)");
  }
  void download_sync(void* dst, const void* src, size_t bytes, void* stream) override {
    DeviceGuard guard(device_);
    if (!bytes) return;
    if (bytes > kPinnedBytes) throw Error("fusedmoe EP: download larger than the staging buffer");
    auto st = static_cast<cudaStream_t>(stream);
    // Wait for the stream first (the count exchange: an NCCL kernel that spins until every peer
    // has launched its side), then copy from the idle stream. A copy into pageable memory that is
    // queued behind the NCCL kernel blocks inside the driver while it waits, and with one thread
    // per GPU a peer still allocating or freeing (cudaMalloc / cudaFree: Layer::warmup, set-up)
    // before its own exchange waits for that thread: neither side ever launches / finishes.
    cuda_ok(cudaStreamSynchronize(st), "cudaStreamSynchronize (counts)");
    cuda_ok(cudaMemcpyAsync(staging_.data(), src, bytes, cudaMemcpyDeviceToHost, st), "cudaMemcpyAsync (counts)");
    cuda_ok(cudaStreamSynchronize(st), "cudaStreamSynchronize (counts copy)");
    std::memcpy(dst, staging_.data(), bytes);
  }
  void zero(void* p, size_t bytes, void* stream) override {
    DeviceGuard guard(device_);
    if (bytes) cuda_ok(cudaMemsetAsync(p, 0, bytes, static_cast<cudaStream_t>(stream)), "cudaMemsetAsync");
  }
  void route(const Plan& p, void* stream) override {
    DeviceGuard guard(device_);
    route_kernel<<<p.world, kRouteThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
    FMOE_EP_LAUNCH_CHECK();
  }
  void pack(const Plan& p, void* stream) override {
    DeviceGuard guard(device_);
    auto st = static_cast<cudaStream_t>(stream);
    if (p.M > 0) {
      const size_t rb = static_cast<size_t>(p.K) * dtype_size(p.x_dtype);
      const bool vec16 =
          rb % 16 == 0 && reinterpret_cast<uintptr_t>(p.x) % 16 == 0 && reinterpret_cast<uintptr_t>(p.send_x) % 16 == 0;
      pack_kernel<<<static_cast<unsigned>(p.M), kPackThreads, 0, st>>>(p, vec16);
      FMOE_EP_LAUNCH_CHECK();
    }
    if (p.padded && p.send_capacity > 0) {
      const int64_t n = p.send_capacity * p.topk;
      const unsigned blocks = static_cast<unsigned>(n / 256 + 1 < 4096 ? n / 256 + 1 : 4096);
      pad_kernel<<<blocks, 256, 0, st>>>(p);
      FMOE_EP_LAUNCH_CHECK();
    }
  }
  void combine(const Plan& p, void* stream) override {
    DeviceGuard guard(device_);
    if (p.M == 0) return;
    auto st = static_cast<cudaStream_t>(stream);
    const size_t es = dtype_size(p.x_dtype);
    const bool aligned = reinterpret_cast<uintptr_t>(p.combine_recv) % 16 == 0 && (p.K * es) % 16 == 0;
    if (aligned && es == 2)
      combine_kernel<8><<<static_cast<unsigned>(p.M), 128, 0, st>>>(p);
    else if (aligned && es == 4)
      combine_kernel<4><<<static_cast<unsigned>(p.M), 128, 0, st>>>(p);
    else
      combine_kernel<1><<<static_cast<unsigned>(p.M), 256, 0, st>>>(p);
    FMOE_EP_LAUNCH_CHECK();
  }

 private:
  static constexpr size_t kPinnedBytes = 4096;
  int device_ = 0;
  std::vector<uint8_t> staging_;
};

}  // namespace

std::unique_ptr<Engine> make_device_engine(int device) { return std::make_unique<DeviceEngine>(device); }

}  // namespace fusedmoe::ep
