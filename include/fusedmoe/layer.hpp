#pragma once
// The MoE expert layer: permute -> GEMM1 (+bias) -> activation -> GEMM2 (+bias) -> weighted
// un-permute. Construct a Layer once per weight set (validates and prepares the weights), then
// call run() per batch. On the CUDA backend run() allocates nothing and never synchronises the
// host, so it can be captured in a CUDA graph; the caller provides workspace_size() bytes.
// Its kernels use programmatic dependent launch among themselves (each waits for its predecessor
// with griddepcontrol.wait); a kernel the caller launches next on the stream with the
// programmatic-serialization attribute must call cudaGridDependencySynchronize() before it reads
// the output, as with any PDL predecessor. Plain launches and events need nothing.
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
  // [M, K] F32/F16/BF16; or, with format fp8-block only, F8_E4M3 codes already quantised in
  // 1x128 groups along K (as DeepGEMM takes them), together with hidden_states_scale.
  TensorView hidden_states;
  TensorView topk_ids;       // [M, topk] I32; ids outside [0, E_global) select nothing
  TensorView topk_weights;   // [M, topk] F32
  TensorView expert_map;     // optional [E_global] I32: global id -> local id or -1
  // [M, K]: the dtype of hidden_states; with F8_E4M3 hidden_states the output's own dtype
  // (F32, F16 or BF16; BF16 is what DeepGEMM / vLLM use) is the activation dtype too.
  TensorView output;
  bool apply_router_weight_on_input = false;  // refused with F8_E4M3 hidden_states
  // Pre-quantised fp8-block inputs only: F32 [M, ceil(K/128)] row-major, contiguous; the GEMM1
  // operand of token t, column k is e4m3(hidden_states[t, k]) * scale[t, k / 128] (no
  // re-quantisation). DeepGEMM's own kernels take these scales column-major and TMA-aligned
  // ([ceil(K/128), round_up(M, 4)] transposed); that layout is not accepted here (transpose it).
  TensorView hidden_states_scale;
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

// The batched ("masked") layout of expert-parallel decode (vLLM's CutlassBatchedExpertsFp8,
// DeepGEMM's masked grouped GEMM): the rows are already grouped by local expert, T rows per
// expert, of which the first expert_num_tokens[e] are valid. Per valid row:
//   output[e, t] = W2[e] . act(W1[e] . hidden_states[e, t] + b1[e]) + b2[e]
// with no routing weight (the caller combines). Rows t >= expert_num_tokens[e] are written
// with zeros. Counts are clamped to [0, T] (a negative count means no rows).
struct MaskedArgs {
  // [E, T, K] F32/F16/BF16, or (fp8-block only) F8_E4M3 codes with hidden_states_scale.
  TensorView hidden_states;
  TensorView hidden_states_scale;  // F8_E4M3 hidden_states: F32 [E, T, ceil(K/128)] row-major
  TensorView expert_num_tokens;    // [E] I32, valid rows of each local expert (device data)
  // [E, T, K]: the dtype of hidden_states, or F32/F16/BF16 with F8_E4M3 hidden_states.
  TensorView output;
  void* workspace = nullptr;  // CUDA: device memory of masked_workspace_size(T) bytes
  size_t workspace_bytes = 0;
  void* stream = nullptr;  // CUDA: cudaStream_t
};

// The sizes of one masked call.
struct MaskedProblem {
  int64_t num_experts = 0;            // E (local)
  int64_t max_tokens_per_expert = 0;  // T
  int64_t hidden = 0;                 // K
  int64_t inter = 0;                  // N
  bool prequantized = false;          // F8_E4M3 hidden_states with scales
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

  // The batched/masked layout (MaskedArgs). Like run(): no allocation, no host sync on CUDA
  // (the counts stay on the device), graph capturable.
  size_t masked_workspace_size(int64_t max_tokens_per_expert) const;
  Support can_implement_masked(const MaskedProblem& problem) const;
  MaskedProblem validate_masked(const MaskedArgs& args) const;  // throws InvalidArgument
  void run_masked(const MaskedArgs& args) const;

  // Prepares everything run() (and run_masked()) will use for 1..max_tokens tokens with this
  // topk, so that the first real call has no extra latency: on CUDA it runs the layer on
  // zero-filled scratch inputs on `stream` for 1, 2, 4, ... and max_tokens tokens (plain and,
  // for fp8-block, pre-quantised inputs), and the masked path for 1, 2, 4, ... up to
  // ceil(max_tokens * topk / E) rows per expert, which launches every kernel, GEMM path and tile
  // config the range selects: their modules get loaded (CUDA lazy loading) and CUTLASS sets
  // their shared-memory attributes. It allocates (about workspace_size(max_tokens, topk) plus
  // the inputs) and frees scratch device memory and synchronises `stream`: call it outside
  // graph capture, e.g. right after constructing the Layer. Throws NotImplemented when
  // can_implement() refuses the problem. CPU backend: nothing to prepare (a no-op).
  void warmup(int64_t max_tokens, int64_t topk, void* stream = nullptr) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fusedmoe
