#pragma once
// Kernel-level GPU tests: the routing plan of a set of expert ids built on the device with the
// library's plan kernels (all buffers owned here), and a typed download.
#include <vector>

#include "cuda/moe_kernels.hpp"
#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {

struct DevicePlan {
  DeviceBuffer ids, emap, slot_expert, slot_row, row_slot, row_expert, offsets, tiles, chunks;
  cuda::PlanBuffers p;
  int E = 0;
  int64_t slots = 0;
  // ids: [slots] global expert ids; E local experts; expert_map: [num_global] or empty (identity).
  DevicePlan(const std::vector<int32_t>& ids_h, int E, const std::vector<int32_t>& expert_map = {},
             int64_t num_global = -1) {
    this->E = E;
    slots = static_cast<int64_t>(ids_h.size());
    const size_t s = ids_h.size() * 4;
    ids = DeviceBuffer(s);
    slot_expert = DeviceBuffer(s);
    slot_row = DeviceBuffer(s);
    row_slot = DeviceBuffer(s);
    row_expert = DeviceBuffer(s);
    offsets = DeviceBuffer((E + 1) * 4);
    tiles = DeviceBuffer((E + 1) * 4);
    chunks = DeviceBuffer(static_cast<size_t>(cuda::plan_chunks(slots) * E) * 4);
    p.slot_expert = static_cast<int32_t*>(slot_expert.get());
    p.slot_row = static_cast<int32_t*>(slot_row.get());
    p.row_slot = static_cast<int32_t*>(row_slot.get());
    p.row_expert = static_cast<int32_t*>(row_expert.get());
    p.expert_offsets = static_cast<int32_t*>(offsets.get());
    p.tile_offsets = static_cast<int32_t*>(tiles.get());
    p.chunk_counts = static_cast<int32_t*>(chunks.get());
    ids.upload(ids_h.data(), s);
    if (!expert_map.empty()) {
      emap = DeviceBuffer(expert_map.size() * 4);
      emap.upload(expert_map.data(), expert_map.size() * 4);
    }
    cuda::launch_plan(static_cast<const int32_t*>(ids.get()), static_cast<const int32_t*>(emap.get()), slots, E,
                      num_global < 0 ? E : num_global, p, nullptr);
  }

  // A gather of x ([slots / topk, K] of dtype dt) over this plan into out: the fields every gather
  // test sets alike (scales and the other per-mode fields are the caller's).
  cuda::GatherParams gather_params(const void* x, DType dt, int64_t K, int64_t topk, const float* weights,
                                   bool on_input, void* out, cuda::Operand op, cuda::Fp8Quant quant) const {
    cuda::GatherParams gp;
    gp.x = x;
    gp.x_dtype = dt;
    gp.K = K;
    gp.topk = topk;
    gp.topk_weights = weights;
    gp.on_input = on_input;
    gp.row_slot = p.row_slot;
    gp.rows = p.expert_offsets + E;
    gp.M = slots / topk;
    gp.slot_row = p.slot_row;
    gp.out = out;
    gp.op = op;
    gp.quant = quant;
    return gp;
  }
};

template <class T>
std::vector<T> download(const DeviceBuffer& b, size_t n) {
  std::vector<T> v(n);
  if (n) b.download(v.data(), n * sizeof(T));
  return v;
}

}  // namespace fusedmoe::gputest
