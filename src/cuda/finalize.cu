// Finalize stage: out[t] = sum over k = 0..topk-1 (in this order) of w_tk * (dequant(y_tk) + b2),
// in fp32 (finalize_term.cuh: each step rounded on its own), then cast to the output dtype.
// Slots whose expert is invalid or not local have no row and contribute nothing. Each output
// element is summed by one thread in a fixed order: deterministic, no atomics.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.hpp"
#include "cuda/device_utils.cuh"
#include "cuda/finalize_term.cuh"

namespace fusedmoe::cuda {
namespace {

// One block per token (grid-stride over the tokens) and column chunk (blockIdx.y).
__global__ void finalize_kernel(FinalizeParams p) {
  chain_wait();
  __shared__ TokenSlots slots;
  const int topk = static_cast<int>(p.topk);
  const float a_tensor = p.dq.kind == Dequant::TENSOR ? tensor_scale_value(p.dq.a_tensor) : 1.0f;
  for (int64_t t = blockIdx.x; t < p.M; t += gridDim.x) {
    __syncthreads();  // the previous token's slot data is no longer read
    slots.load(p, t, a_tensor);
    __syncthreads();
    const ColRange cr = block_columns(p.K);
    for (int64_t c = cr.begin + threadIdx.x; c < cr.end; c += blockDim.x) {
      float acc = 0.0f;
      for (int k = 0; k < topk; ++k) {
        const int32_t r = slots.row[k];
        if (r < 0) continue;
        float yv = load_as_float(p.y, p.y_dtype, static_cast<int64_t>(r) * p.K + c);
        if (p.y2) yv += p.y2[static_cast<int64_t>(r) * p.K + c];  // the split GEMM2's second half (fp32 y)
        acc = add_slot(p, acc, yv, slots.weight[k], slots.factor[k], slots.expert[k], c);
      }
      store_from_float(p.out, p.out_dtype, t * p.K + c, acc);
    }
  }
}

// Vector path: one block per token (grid-stride over the tokens) and column chunk (blockIdx.y,
// several only when there are too few tokens to fill the GPU); V columns per thread per step,
// one 16-byte load of y per slot: 4 of fp32 y, 8 of bf16 y (with 4 bf16 columns, 8-byte loads,
// the finalize of DeepSeek-V3 TP8 at 4096 tokens ran 441 -> 592 us, src/cuda/NOTES.md). The
// loaded words stay packed until their slot is summed: unpacked to floats, 8 slots x 8 bf16
// columns took 128 registers and halved the resident warps (Mixtral, top-2, finalize +10..+30%).
// The token's slot rows, experts, weights and scale factors are read once into shared memory;
// then each step issues the y loads (16 bytes each) of 8 slots before summing them in slot
// order, so a thread keeps 8 loads in flight and does no per-element index division. Same
// operations in the same order as finalize_kernel.
constexpr int kSlotBatch = 8;
// v[q] = a[i + q] for q < V (fp32, i a multiple of 4: 16-byte loads when a is 16-byte aligned);
// `none` when there is no array.
template <int V>
__device__ __forceinline__ void load_columns(const float* a, int64_t i, float (&v)[V], float none) {
  if (a == nullptr) {
#pragma unroll
    for (int q = 0; q < V; ++q) v[q] = none;
  } else if ((reinterpret_cast<uintptr_t>(a) & 15) == 0) {
#pragma unroll
    for (int q = 0; q < V; q += 4) {
      const float4 x = *reinterpret_cast<const float4*>(a + i + q);
      v[q] = x.x;
      v[q + 1] = x.y;
      v[q + 2] = x.z;
      v[q + 3] = x.w;
    }
  } else {
#pragma unroll
    for (int q = 0; q < V; ++q) v[q] = a[i + q];
  }
}

// kExtras: the layer has a bias or CHANNEL dequant, whose per-slot vectors (L2 or HBM loads) are
// issued with the batch's y loads, 4 slots a batch. In the sum they were a load and its wait per
// slot after the y loads (cuobjdump: each slot's bias / column-scale loads inside its branch of
// the sum loop), so a thread waited topk + 1 round trips per step instead of one.
// p.early (FinalizeParams::early): before chain_wait() the block reads its first token's slots - the
// plan's slot_row / row_expert, the router weights and the dequant factors, all final when it
// starts (written two or more chained kernels back) - so their chain of dependent loads overlaps
// GEMM2's tail; y only after the wait, which every block reaches (also with no token).
// kY2 (fp32 y, V = 4): GEMM2's k split in two (FinalizeParams::y2): each slot's y words plus y2's, in that order,
// before its terms. Its own instance: the other instances keep their registers (8 more loads in flight a batch).
template <int V, bool kExtras, bool kY2 = false>
__global__ void __launch_bounds__(kVecThreads) finalize_vec_kernel(FinalizeParams p) {
  static_assert(!kY2 || V == 4, "y2: fp32 y");
  if (!p.early) chain_wait();
  static_assert(V == 4 || V == 8, "4 fp32 or 8 bf16 columns: one 16-byte load");
  constexpr int64_t kYBytes = 16 / V;
  constexpr int B = kExtras ? 4 : kSlotBatch;  // slots per batch (registers: y 4 + bias V + scales V a slot)
  const char* y_bytes = static_cast<const char*>(p.y);
  __shared__ TokenSlots slots;
  const int topk = static_cast<int>(p.topk);
  const int64_t vecs = p.K / V;
  const int64_t per = (vecs + gridDim.y - 1) / gridDim.y;
  const int64_t vb = static_cast<int64_t>(blockIdx.y) * per, ve = min(vecs, vb + per);
  const float a_tensor = p.dq.kind == Dequant::TENSOR ? tensor_scale_value(p.dq.a_tensor) : 1.0f;
  const float* wch = p.dq.kind == Dequant::CHANNEL ? p.dq.w : nullptr;
  if (p.early) {
    if (blockIdx.x < p.M) slots.load(p, blockIdx.x, a_tensor);
    chain_wait();
  }
  for (int64_t t = blockIdx.x; t < p.M; t += gridDim.x) {
    __syncthreads();  // the previous token's slot data is no longer read
    if (!p.early || t != blockIdx.x) slots.load(p, t, a_tensor);
    __syncthreads();
    for (int64_t v = vb + threadIdx.x; v < ve; v += blockDim.x) {
      const int64_t c = v * V;
      float acc[V] = {};
      for (int k0 = 0; k0 < topk; k0 += B) {
        int32_t r[B];
        uint4 raw[B];  // kept packed until summed: 4 registers a slot, not V
#pragma unroll
        for (int j = 0; j < B; ++j) r[j] = k0 + j < topk ? slots.row[k0 + j] : -1;
#pragma unroll
        for (int j = 0; j < B; ++j)
          if (r[j] >= 0)
            raw[j] = *reinterpret_cast<const uint4*>(y_bytes + (static_cast<int64_t>(r[j]) * p.K + c) * kYBytes);
        if constexpr (kY2) {
          uint4 raw2[B];
#pragma unroll
          for (int j = 0; j < B; ++j)
            if (r[j] >= 0) raw2[j] = *reinterpret_cast<const uint4*>(p.y2 + static_cast<int64_t>(r[j]) * p.K + c);
#pragma unroll
          for (int j = 0; j < B; ++j)
            if (r[j] >= 0) {
              raw[j].x = __float_as_uint(__uint_as_float(raw[j].x) + __uint_as_float(raw2[j].x));
              raw[j].y = __float_as_uint(__uint_as_float(raw[j].y) + __uint_as_float(raw2[j].y));
              raw[j].z = __float_as_uint(__uint_as_float(raw[j].z) + __uint_as_float(raw2[j].z));
              raw[j].w = __float_as_uint(__uint_as_float(raw[j].w) + __uint_as_float(raw2[j].w));
            }
        }
        // The expert's per-column weight scales and bias of these V columns, as 16-byte loads
        // where aligned (scalar loads of them made fp8-channel's finalize 1.7x the fp8-tensor one).
        float wc[kExtras ? B : 1][V], bv[kExtras ? B : 1][V];
        if constexpr (kExtras) {
#pragma unroll
          for (int j = 0; j < B; ++j) {
            const int64_t e = r[j] >= 0 ? slots.expert[k0 + j] : 0;
            load_columns<V>(wch, e * p.K + c, wc[j], 1.0f);
            load_columns<V>(p.bias, e * p.K + c, bv[j], 0.0f);
          }
        }
#pragma unroll
        for (int j = 0; j < B; ++j) {
          if (r[j] < 0) continue;
          const float w = slots.weight[k0 + j], f = slots.factor[k0 + j];
          const uint32_t u[4] = {raw[j].x, raw[j].y, raw[j].z, raw[j].w};
#pragma unroll
          for (int q = 0; q < V; ++q) {
            // fp32: the word itself; bf16: the upper 16 bits of an fp32 (low half of word q / 2 first).
            const float yq = V == 4 ? __uint_as_float(u[q])
                                    : __uint_as_float(q % 2 == 0 ? u[q / 2] << 16 : u[q / 2] & 0xffff0000u);
            // Without kExtras there is no bias and no CHANNEL scale (launch_finalize): neither value is used.
            if constexpr (kExtras) acc[q] = add_slot_loaded(p, acc[q], yq, w, f, wc[j][q], bv[j][q]);
            else acc[q] = add_slot_loaded(p, acc[q], yq, w, f, 1.0f, 0.0f);
          }
        }
      }
      if constexpr (V == 4) store4_from_float(p.out, p.out_dtype, t * p.K + c, acc);
      else store8_from_float(p.out, p.out_dtype, t * p.K + c, acc);
    }
  }
}

}  // namespace

bool finalize_supports_topk(int64_t topk) { return topk <= kMaxTokenSlots; }

void launch_finalize(const FinalizeParams& p, cudaStream_t stream) {
  if (p.y_dtype != DType::F32 && p.y_dtype != DType::BF16)
    throw Error(std::string("finalize: y_dtype ") + dtype_name(p.y_dtype) + " (expected f32 or bf16)");
  const size_t out_bytes = p.out_dtype == DType::F32 ? 4 : 2;
  const int V = p.y_dtype == DType::F32 ? 4 : 8;  // columns per 16-byte load of y
  if (p.y2 && p.y_dtype != DType::F32) throw Error("finalize: y2 (GEMM2 split in two) needs an f32 y");
  if (p.K % V == 0 && aligned_to(p.y, 16) && aligned_to(p.out, V * out_bytes) && aligned_to(p.y2, 16)) {
    // Column chunks only while the tokens alone give fewer than ~1024 blocks.
    const int64_t vecs = p.K / V, steps = (vecs + kVecThreads - 1) / kVecThreads;
    const int64_t split = std::max<int64_t>(1, std::min<int64_t>(steps, 1024 / std::max<int64_t>(p.M, 1)));
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(p.M, 1), 65535)), static_cast<unsigned>(split));
    const bool extras = p.bias != nullptr || p.dq.kind == Dequant::CHANNEL;
    if (p.y2) {
      if (extras) launch_chained(finalize_vec_kernel<4, true, true>, grid, kVecThreads, 0, stream, p);
      else launch_chained(finalize_vec_kernel<4, false, true>, grid, kVecThreads, 0, stream, p);
    } else if (V == 4) {
      if (extras) launch_chained(finalize_vec_kernel<4, true>, grid, kVecThreads, 0, stream, p);
      else launch_chained(finalize_vec_kernel<4, false>, grid, kVecThreads, 0, stream, p);
    } else {
      if (extras) launch_chained(finalize_vec_kernel<8, true>, grid, kVecThreads, 0, stream, p);
      else launch_chained(finalize_vec_kernel<8, false>, grid, kVecThreads, 0, stream, p);
    }
    return;
  }
  const int threads = p.K >= 2048 ? 256 : 128;
  const int64_t blocks = p.M < 65535 ? p.M : 65535;
  const dim3 grid(static_cast<unsigned>(blocks), column_blocks(p.K));
  launch_chained(finalize_kernel, grid, threads, 0, stream, p);
}

}  // namespace fusedmoe::cuda
