#pragma once
// The MoE expert layer: permute -> GEMM1 (+bias) -> activation -> GEMM2 (+bias) -> weighted
// un-permute. Construct a Layer once per weight set (validates and prepares the weights), then
// call run() per batch. On the CUDA backend run() allocates nothing and never synchronises the
// host, so it can be captured in a CUDA graph; the caller provides workspace_size() bytes.
#include <memory>
#include <string>

#include "fusedmoe/config.hpp"
#include "fusedmoe/tensor.hpp"

namespace fusedmoe {

// Weight tensors, named as in the layer file contract (docs/LAYER_FILE.md). Absent = ndim 0.
struct LayerWeights {
  TensorView w13_weight;        // [E, 2N or N, K] (4-bit: U8 [E, 2N, K/2])
  TensorView w2_weight;         // [E, K, N]       (4-bit: U8 [E, K, N/2])
  TensorView w13_weight_scale;  // format-dependent, see the contract
  TensorView w2_weight_scale;
  TensorView w13_weight_scale_2;  // nvfp4: F32 [E]
  TensorView w2_weight_scale_2;
  TensorView w13_input_scale;  // fp8-tensor: F32 [1] static scale; nvfp4 W4A4: F32 [E]
  TensorView w2_input_scale;
  TensorView w13_bias;  // F32 [E, 2N or N]
  TensorView w2_bias;   // F32 [E, K]
};

struct RunArgs {
  TensorView hidden_states;  // [M, K] F32/F16/BF16
  TensorView topk_ids;       // [M, topk] I32; ids outside [0, E_global) select nothing
  TensorView topk_weights;   // [M, topk] F32
  TensorView expert_map;     // optional [E_global] I32: global id -> local id or -1
  TensorView output;         // [M, K], dtype of hidden_states
  bool apply_router_weight_on_input = false;
  void* workspace = nullptr;  // CUDA: device memory of workspace_size() bytes
  size_t workspace_bytes = 0;
  void* stream = nullptr;  // CUDA: cudaStream_t (nullptr = legacy default stream)
};

enum class Backend : uint8_t { AUTO, CPU, CUDA };
const char* backend_name(Backend b);

// CPU backend precision: FAST accumulates in fp32; ORACLE_FP64 is the float64 oracle used by
// the tests (same quantisation steps, float64 arithmetic everywhere else).
enum class CpuPrecision : uint8_t { FAST, ORACLE_FP64 };

struct LayerOptions {
  Backend backend = Backend::AUTO;  // AUTO = CUDA when the weights live on a CUDA device
  int cpu_threads = 0;              // 0 = hardware concurrency
  CpuPrecision cpu_precision = CpuPrecision::FAST;
};

// Device (CUDA) or wall-clock (CPU) time of each stage of one run, in milliseconds.
struct StageTimes {
  double permute_ms = 0;     // group rows by expert (+ quantise GEMM1's input)
  double gemm1_ms = 0;       // grouped GEMM1 (+ bias, + activation where fused)
  double activation_ms = 0;  // activation (+ quantise GEMM2's input), 0 when fused into GEMM1
  double gemm2_ms = 0;       // grouped GEMM2
  double finalize_ms = 0;    // un-permute + weighted top-k sum
  double total_ms = 0;
};

struct Support {
  bool ok = true;
  std::string reason;  // why not, when !ok
};

// Is this backend built into the library / usable on this machine?
bool backend_available(Backend b);

class Layer {
 public:
  // Validates every weight tensor (throws InvalidArgument naming it) and prepares the backend.
  // The weights must outlive the Layer (it keeps views, not copies, where it can).
  Layer(const LayerConfig& config, const LayerWeights& weights, const LayerOptions& options = {});
  ~Layer();
  Layer(Layer&&) noexcept;
  Layer& operator=(Layer&&) noexcept;

  const LayerConfig& config() const;
  Backend backend() const;  // resolved, never AUTO
  int64_t num_experts() const;
  int64_t hidden() const;
  int64_t inter() const;

  // Device workspace needed by run() for at most max_tokens tokens and this topk.
  size_t workspace_size(int64_t max_tokens, int64_t topk) const;
  // Whether run() can do this problem; never runs anything wrong.
  Support can_implement(const Problem& problem) const;
  // Checks every argument of run() and returns the problem it describes (throws InvalidArgument).
  Problem validate(const RunArgs& args) const;
  void run(const RunArgs& args) const;
  // run() with a timer between the stages (the benchmark's breakdown). Synchronises the
  // stream, so it is not graph-capturable; results are the same as run()'s.
  StageTimes run_timed(const RunArgs& args) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fusedmoe
