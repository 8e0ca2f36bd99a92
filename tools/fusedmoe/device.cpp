// CUDA runtime calls live only here and only when the library has its CUDA backend; the rest
// of the command stays plain C++.
#include "device.hpp"

#include "fusedmoe/error.hpp"

#ifdef FUSEDMOE_WITH_CUDA
#include <cuda_runtime.h>

#include <memory>
#endif

namespace fusedmoe::cli {

#ifndef FUSEDMOE_WITH_CUDA

int cuda_device_count() { return 0; }

RunResult execute_cuda(const LayerFile&, const InputFile&, int) {
  throw Error("this fusedmoe was built without CUDA");
}

#else

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}

// Device copies of host tensors, freed together.
class DeviceArena {
 public:
  ~DeviceArena() {
    for (void* p : ptrs_) cudaFree(p);
  }
  void* alloc(size_t n) {
    void* p = nullptr;
    check(cudaMalloc(&p, n == 0 ? 1 : n), "cudaMalloc");
    ptrs_.push_back(p);
    return p;
  }
  // A device view with the host view's dtype and shape (absent stays absent).
  TensorView upload(const TensorView& h, int device) {
    if (!h.present()) return TensorView{};
    void* p = alloc(h.nbytes());
    check(cudaMemcpy(p, h.data, h.nbytes(), cudaMemcpyHostToDevice), "cudaMemcpy to device");
    return TensorView::contiguous(p, h.dtype, h.shape.data(), h.ndim, DeviceType::CUDA, device);
  }

 private:
  std::vector<void*> ptrs_;
};

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

RunResult execute_cuda(const LayerFile& layer, const InputFile& in, int iters) {
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  DeviceArena arena;
  const LayerWeights h = layer.weights();
  LayerWeights d;
  d.w13_weight = arena.upload(h.w13_weight, dev);
  d.w2_weight = arena.upload(h.w2_weight, dev);
  d.w13_weight_scale = arena.upload(h.w13_weight_scale, dev);
  d.w2_weight_scale = arena.upload(h.w2_weight_scale, dev);
  d.w13_weight_scale_2 = arena.upload(h.w13_weight_scale_2, dev);
  d.w2_weight_scale_2 = arena.upload(h.w2_weight_scale_2, dev);
  d.w13_input_scale = arena.upload(h.w13_input_scale, dev);
  d.w2_input_scale = arena.upload(h.w2_input_scale, dev);
  d.w13_bias = arena.upload(h.w13_bias, dev);
  d.w2_bias = arena.upload(h.w2_bias, dev);
  Layer l(layer.config, d, LayerOptions{Backend::CUDA, 0, CpuPrecision::FAST});

  RunArgs a;
  a.hidden_states = arena.upload(in.hidden_states.view(), dev);
  a.topk_ids = arena.upload(in.topk_ids.view(), dev);
  a.topk_weights = arena.upload(in.topk_weights.view(), dev);
  a.expert_map = in.has_expert_map ? arena.upload(in.expert_map.view(), dev) : TensorView{};
  a.apply_router_weight_on_input = in.apply_router_weight_on_input;
  RunResult r;
  r.output = HostTensor(in.hidden_states.dtype, in.hidden_states.shape);
  a.output = arena.upload(r.output.view(), dev);
  const int64_t M = in.hidden_states.shape[0], topk = in.topk_ids.shape[1];
  a.workspace_bytes = l.workspace_size(M, topk);
  a.workspace = a.workspace_bytes ? arena.alloc(a.workspace_bytes) : nullptr;
  a.stream = nullptr;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    l.run(a);
    check(cudaDeviceSynchronize(), "layer run");
    r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  check(cudaMemcpy(r.output.bytes.data(), a.output.data, r.output.bytes.size(), cudaMemcpyDeviceToHost),
        "cudaMemcpy to host");
  return r;
}

#endif

}  // namespace fusedmoe::cli
