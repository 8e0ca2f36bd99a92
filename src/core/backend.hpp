#pragma once
// The internal interface between Layer (validation, dispatch) and the backends.
#include <memory>

#include "fusedmoe/layer.hpp"

namespace fusedmoe::detail {

// Sizes of the layer, derived from the validated weights.
struct LayerShape {
  int64_t num_experts = 0;  // E (local)
  int64_t hidden = 0;       // K
  int64_t inter = 0;        // N
  int64_t w13_rows = 0;     // 2N gated, N for relu2
};

class BackendImpl {
 public:
  virtual ~BackendImpl() = default;
  virtual size_t workspace_size(int64_t max_tokens, int64_t topk) const = 0;
  virtual Support can_implement(const Problem& problem) const = 0;
  // args and problem are validated by Layer before this is called.
  virtual void run(const RunArgs& args, const Problem& problem) const = 0;
  virtual StageTimes run_timed(const RunArgs& args, const Problem& problem) const = 0;
  // The masked layout (MaskedArgs); args validated, can_implement_masked() ok, workspace checked.
  virtual size_t masked_workspace_size(int64_t max_tokens_per_expert) const = 0;
  virtual Support can_implement_masked(const MaskedProblem& problem) const = 0;
  virtual void run_masked(const MaskedArgs& args, const MaskedProblem& problem) const = 0;
  // Layer::warmup (arguments checked, can_implement() ok for the largest problem).
  virtual void warmup(int64_t max_tokens, int64_t topk, void* stream) const = 0;
};

std::unique_ptr<BackendImpl> make_cpu_backend(const LayerConfig& config, const LayerWeights& w,
                                              const LayerShape& shape, const LayerOptions& opt);
// Defined in src/cuda/ when the library is built with CUDA; otherwise a stub that throws.
std::unique_ptr<BackendImpl> make_cuda_backend(const LayerConfig& config, const LayerWeights& w,
                                               const LayerShape& shape, const LayerOptions& opt);
bool cuda_backend_available();

// Validation helpers (validate.cpp). Throw InvalidArgument naming the argument.
LayerShape validate_layer(const LayerConfig& config, const LayerWeights& w);
Problem validate_run_args(const LayerConfig& config, const LayerShape& shape, const RunArgs& args,
                          DeviceType device);
MaskedProblem validate_masked_args(const LayerConfig& config, const LayerShape& shape, const MaskedArgs& args,
                                   DeviceType device);

}  // namespace fusedmoe::detail
