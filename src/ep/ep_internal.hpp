#pragma once
// Internals of the expert-parallel layer (src/ep): the per-call plan shared by the host engine
// (CPU loops, thread transport) and the device engine (CUDA kernels, NCCL transport). Only
// plain types here: it is included by .cu files as well.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "fusedmoe/ep.hpp"

#if defined(__CUDACC__)
#define FMOE_EP_HD __host__ __device__
#else
#define FMOE_EP_HD
#endif

namespace fusedmoe::ep {

// Ranks of a CUDA EP group (the combine kernel keeps one row index per rank in shared memory).
constexpr int kMaxDeviceWorld = 64;

// Everything the route / pack / combine steps read and write. Pointers are in the engine's
// memory (host for the host engine, device for the device engine).
struct Plan {
  int world = 1;
  int rank = 0;
  int64_t M = 0;  // tokens of this call on this rank
  int64_t K = 0;  // hidden
  int64_t topk = 0;
  int64_t E = 0;           // global experts
  int64_t max_tokens = 0;  // rows of one peer block in PADDED mode
  bool padded = false;
  const int32_t* owner = nullptr;  // [E] rank owning each global expert
  // the caller's tokens
  const void* x = nullptr;  // [M, K] x_dtype
  DType x_dtype = DType::BF16;
  const int32_t* ids = nullptr;    // [M, topk]
  const float* weights = nullptr;  // [M, topk]
  // route: per destination count of tokens and position of token t in block d (or -1)
  int32_t* send_counts = nullptr;  // [world]
  int32_t* pos = nullptr;          // [M, world]
  // pack: send rows, block d at offset block_offset(d)
  bool fp8 = false;    // e4m3 codes + 1x128 scales instead of x_dtype rows
  bool ue8m0 = false;  // fp8: scales rounded up to powers of two
  void* send_x = nullptr;
  float* send_scale = nullptr;  // [rows, groups] (fp8)
  int32_t* send_ids = nullptr;  // [rows, topk]
  float* send_w = nullptr;      // [rows, topk]
  int64_t send_capacity = 0;    // rows of the send arrays (world * max_tokens)
  // combine: partial rows returned by each destination, same block layout as the send rows
  const void* combine_recv = nullptr;  // [rows, K] x_dtype
  void* out = nullptr;                 // [M, K] x_dtype

  FMOE_EP_HD int64_t groups() const { return (K + 127) / 128; }
};

// The row layout of a destination block, the same on host and device.
FMOE_EP_HD inline int64_t block_offset(const Plan& p, const int32_t* counts, int d) {
  if (p.padded) return static_cast<int64_t>(d) * p.max_tokens;
  int64_t off = 0;
  for (int i = 0; i < d; ++i) off += counts[i];
  return off;
}
// Does token t have an expert on rank d?
FMOE_EP_HD inline bool token_goes_to(const Plan& p, int64_t t, int d) {
  for (int64_t k = 0; k < p.topk; ++k) {
    const int32_t g = p.ids[t * p.topk + k];
    if (g >= 0 && g < p.E && p.owner[g] == d) return true;
  }
  return false;
}

// The memory and the per-call steps of one kind of rank.
class Engine {
 public:
  virtual ~Engine() = default;
  virtual void* alloc(size_t bytes) = 0;  // zero-filled
  virtual void release(void* p) = 0;
  virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;  // construction time
  // Copies bytes to the host and waits for them (the one host sync of EXACT mode).
  virtual void download_sync(void* host_dst, const void* src, size_t bytes, void* stream) = 0;
  virtual void zero(void* p, size_t bytes, void* stream) = 0;
  // send_counts and pos.
  virtual void route(const Plan& p, void* stream) = 0;
  // send rows of every destination; PADDED: also ids -1 / weights 0 in the rows past the counts.
  virtual void pack(const Plan& p, void* stream) = 0;
  // out[t] = sum over d ascending of the partial row of (t, d).
  virtual void combine(const Plan& p, void* stream) = 0;
};

std::unique_ptr<Engine> make_host_engine();
// CUDA builds only (throws NotImplemented otherwise); device = the CUDA device index.
std::unique_ptr<Engine> make_device_engine(int device);

}  // namespace fusedmoe::ep
