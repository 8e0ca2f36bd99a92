// Layer: validation and dispatch to a backend. No kernel code here.
#include "core/backend.hpp"
#include "fusedmoe/error.hpp"

namespace fusedmoe {

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::AUTO: return "auto";
    case Backend::CPU: return "cpu";
    case Backend::CUDA: return "cuda";
  }
  return "?";
}

bool backend_available(Backend b) {
  switch (b) {
    case Backend::AUTO: return true;
    case Backend::CPU: return true;
    case Backend::CUDA: return detail::cuda_backend_available();
  }
  return false;
}

struct Layer::Impl {
  LayerConfig config;
  detail::LayerShape shape;
  Backend backend = Backend::CPU;
  std::unique_ptr<detail::BackendImpl> impl;
};

Layer::Layer(const LayerConfig& config, const LayerWeights& weights, const LayerOptions& options)
    : impl_(std::make_unique<Impl>()) {
  impl_->config = config;
  impl_->shape = detail::validate_layer(config, weights);
  const bool on_gpu = weights.w13_weight.device == DeviceType::CUDA;
  Backend b = options.backend;
  if (b == Backend::AUTO) b = on_gpu ? Backend::CUDA : Backend::CPU;
  if (b == Backend::CPU && on_gpu)
    throw InvalidArgument("weights", "CPU tensors for the CPU backend", "CUDA tensors");
  if (b == Backend::CUDA && !on_gpu)
    throw InvalidArgument("weights", "CUDA tensors for the CUDA backend", "CPU tensors");
  impl_->backend = b;
  impl_->impl = b == Backend::CPU ? detail::make_cpu_backend(config, weights, impl_->shape, options)
                                  : detail::make_cuda_backend(config, weights, impl_->shape, options);
}

Layer::~Layer() = default;
Layer::Layer(Layer&&) noexcept = default;
Layer& Layer::operator=(Layer&&) noexcept = default;

const LayerConfig& Layer::config() const { return impl_->config; }
Backend Layer::backend() const { return impl_->backend; }
int64_t Layer::num_experts() const { return impl_->shape.num_experts; }
int64_t Layer::hidden() const { return impl_->shape.hidden; }
int64_t Layer::inter() const { return impl_->shape.inter; }

size_t Layer::workspace_size(int64_t max_tokens, int64_t topk) const {
  if (max_tokens < 0) throw InvalidArgument("max_tokens", ">= 0", std::to_string(max_tokens));
  if (topk < 1) throw InvalidArgument("topk", ">= 1", std::to_string(topk));
  return impl_->impl->workspace_size(max_tokens, topk);
}

Support Layer::can_implement(const Problem& problem) const { return impl_->impl->can_implement(problem); }

Problem Layer::validate(const RunArgs& args) const {
  const DeviceType dev = impl_->backend == Backend::CUDA ? DeviceType::CUDA : DeviceType::CPU;
  return detail::validate_run_args(impl_->config, impl_->shape, args, dev);
}

namespace {
Problem checked_problem(const Layer& layer, const RunArgs& args) {
  const Problem p = layer.validate(args);
  const Support s = layer.can_implement(p);
  if (!s.ok)
    throw NotImplemented(std::string(backend_name(layer.backend())) + " backend cannot run this problem: " + s.reason);
  const size_t need = layer.workspace_size(p.num_tokens, p.topk);
  if (need > 0 && (args.workspace == nullptr || args.workspace_bytes < need))
    throw InvalidArgument("workspace_bytes", ">= " + std::to_string(need) + " (workspace_size())",
                          std::to_string(args.workspace == nullptr ? 0 : args.workspace_bytes));
  return p;
}
}  // namespace

void Layer::run(const RunArgs& args) const { impl_->impl->run(args, checked_problem(*this, args)); }

StageTimes Layer::run_timed(const RunArgs& args) const {
  return impl_->impl->run_timed(args, checked_problem(*this, args));
}

size_t Layer::masked_workspace_size(int64_t max_tokens_per_expert) const {
  if (max_tokens_per_expert < 0)
    throw InvalidArgument("max_tokens_per_expert", ">= 0", std::to_string(max_tokens_per_expert));
  return impl_->impl->masked_workspace_size(max_tokens_per_expert);
}

Support Layer::can_implement_masked(const MaskedProblem& problem) const {
  return impl_->impl->can_implement_masked(problem);
}

MaskedProblem Layer::validate_masked(const MaskedArgs& args) const {
  const DeviceType dev = impl_->backend == Backend::CUDA ? DeviceType::CUDA : DeviceType::CPU;
  return detail::validate_masked_args(impl_->config, impl_->shape, args, dev);
}

void Layer::run_masked(const MaskedArgs& args) const {
  const MaskedProblem p = validate_masked(args);
  const Support s = can_implement_masked(p);
  if (!s.ok)
    throw NotImplemented(std::string(backend_name(backend())) + " backend cannot run this masked problem: " + s.reason);
  const size_t need = masked_workspace_size(p.max_tokens_per_expert);
  if (need > 0 && (args.workspace == nullptr || args.workspace_bytes < need))
    throw InvalidArgument("workspace_bytes", ">= " + std::to_string(need) + " (masked_workspace_size())",
                          std::to_string(args.workspace == nullptr ? 0 : args.workspace_bytes));
  impl_->impl->run_masked(args, p);
}

void Layer::warmup(int64_t max_tokens, int64_t topk, void* stream) const {
  if (max_tokens < 0) throw InvalidArgument("max_tokens", ">= 0", std::to_string(max_tokens));
  if (topk < 1) throw InvalidArgument("topk", ">= 1", std::to_string(topk));
  if (max_tokens == 0) return;
  Problem p;
  p.num_tokens = max_tokens;
  p.hidden = hidden();
  p.inter = inter();
  p.num_experts = num_experts();
  p.num_global_experts = num_experts();
  p.topk = topk;
  const Support s = can_implement(p);
  if (!s.ok)
    throw NotImplemented(std::string(backend_name(backend())) + " backend cannot run this problem: " + s.reason);
  impl_->impl->warmup(max_tokens, topk, stream);
}

}  // namespace fusedmoe
