#pragma once
// Expert weights generated on the GPU directly in the target format (never on the host), and
// host copies of a few experts for the float64 oracle.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common.hpp"
#include "fusedmoe/layer.hpp"
#include "presets.hpp"

namespace fmbench {

// Activation scale handling of fp8-tensor: static (w13/w2_input_scale given) or dynamic.
enum class Fp8ActScale : uint8_t { STATIC, DYNAMIC };

struct WeightGenOptions {
  uint64_t seed = 1;
  Fp8ActScale fp8_act_scale = Fp8ActScale::STATIC;
  // |GEMM2 input| the static activation scales are sized for (fp8-tensor, nvfp4-w4a4).
  float gemm2_input_range = 16.0f;
  int device = 0;
  bool host = false;  // generate in host memory (CPU tensors) instead: --self-test
};

struct OwnedTensor {
  std::string name;  // layer-file name ("w13_weight", ...)
  fusedmoe::TensorView fusedmoe::LayerWeights::*member = nullptr;
  DeviceBuffer buffer;             // device memory, or
  std::vector<uint8_t> host_buffer;  // host memory (WeightGenOptions::host)
  fusedmoe::TensorView view;
  bool per_expert = false;  // leading dimension is E
};

struct DeviceWeights {
  fusedmoe::LayerConfig config;
  fusedmoe::LayerWeights weights;  // views into `tensors`
  std::vector<std::unique_ptr<OwnedTensor>> tensors;
  int64_t E = 0, K = 0, N = 0, R = 0;  // local experts
  double bytes_per_expert = 0;  // every per-expert tensor: weights, scales, biases, input scales
  double shared_bytes = 0;      // tensors not per expert (fp8-tensor static input scales)
  std::string note;             // how the data was drawn (goes into the point's note)
};

// Throws CudaError (out_of_memory() when the GPU is full).
std::unique_ptr<DeviceWeights> make_device_weights(const Shape& shape, const FormatVariant& fv,
                                                   const WeightGenOptions& opt, cudaStream_t stream);

// Host copies of the listed local experts, as a layer of experts.size() experts (same format).
struct HostWeights {
  fusedmoe::LayerWeights weights;
  std::vector<std::vector<uint8_t>> store;
  int64_t E = 0;
};

// Experts already copied back for earlier points of the same weights (up to a byte cap), so each
// expert crosses PCIe once per (shape, format).
struct HostExpertCache {
  size_t cap_bytes = 0;
  size_t bytes = 0;
  std::map<int32_t, std::vector<std::vector<uint8_t>>> experts;  // expert -> bytes per tensor
};

std::unique_ptr<HostWeights> copy_experts_to_host(const DeviceWeights& dw, const std::vector<int32_t>& experts,
                                                  HostExpertCache* cache = nullptr);

// Bytes a run must read for these experts (weights + scales + biases) plus the shared tensors.
double weight_bytes_for(const DeviceWeights& dw, int64_t experts_hit);

}  // namespace fmbench
