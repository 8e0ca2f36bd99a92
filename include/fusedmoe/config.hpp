#pragma once
// What a layer is: its weight/activation format, its activation function and options.
// Numerics of every choice are pinned in docs/SEMANTICS.md (and the shared reference).
#include <cstdint>
#include <string>

namespace fusedmoe {

enum class Format : uint8_t {
  BF16,
  FP16,
  FP32,
  FP8_TENSOR,   // e4m3 weights, fp32 scale per expert; activations per-tensor (static or dynamic)
  FP8_CHANNEL,  // e4m3 weights, fp32 scale per output channel; activations per token (dynamic)
  FP8_BLOCK,    // e4m3 weights in 128x128 blocks; activations per token in groups of 128 along K
  W4A8_INT4,    // int4 weights, bf16 group-128 scales; per-token dynamic fp8 activations
  MXFP4,        // e2m1 weights, e8m0 block-32 scales; bf16 or fp8 activations
  NVFP4,        // e2m1 weights, e4m3 block-16 scales, fp32 global scale; bf16 or nvfp4 activations
};

// The activation operand type of the 4-bit formats (layer file key `act_dtype`).
enum class ActDtype : uint8_t { BF16, FP8, NVFP4 };

enum class Activation : uint8_t { SILU, GELU, GELU_TANH, RELU2, SWIGLUOAI };

// Which half of w13 is the gate: vLLM stores [gate; up], FlashInfer/TensorRT-LLM [up; gate].
enum class GateUpOrder : uint8_t { GATE_UP, UP_GATE };

// How the 4-bit formats' block scales are laid out in memory.
enum class ScaleLayout : uint8_t { LINEAR, SWIZZLED_128x4 };

// Encoding of int4 weights for W4A8: two's complement, or unsigned with offset 8 (q + 8).
enum class Int4Encoding : uint8_t { SIGNED, UINT4B8 };

struct LayerConfig {
  Format format = Format::BF16;
  Activation activation = Activation::SILU;
  GateUpOrder gate_up_order = GateUpOrder::GATE_UP;
  // gate/up rows alternate [g0,u0,g1,u1,..] (gated activations; relu2 has no pairs); false: the
  // halves [gate; up] (or [up; gate], gate_up_order). The CUDA backend fuses the activation into
  // GEMM1 at large batches for both layouts; layer files store `interleaved` for swigluoai only
  // (LAYER_FILE.md).
  bool interleaved = false;
  float swiglu_alpha = 1.702f;
  float swiglu_limit = 7.0f;
  ActDtype act_dtype = ActDtype::BF16;          // mxfp4 / nvfp4 only
  bool fp8_block_ue8m0 = false;                 // fp8-block: activation scales rounded up to 2^k
  ScaleLayout weight_scale_layout = ScaleLayout::LINEAR;  // mxfp4 / nvfp4 block scales
  Int4Encoding int4_encoding = Int4Encoding::SIGNED;      // w4a8
};

// The sizes of one call. num_experts = experts held by this layer (local);
// num_global_experts = range of topk ids (== num_experts without an expert_map).
struct Problem {
  int64_t num_tokens = 0;  // M
  int64_t hidden = 0;      // K
  int64_t inter = 0;       // N (intermediate size per expert)
  int64_t num_experts = 0;
  int64_t num_global_experts = 0;
  int64_t topk = 0;
};

bool is_gated(Activation act);
// Rows of w13: 2N for gated activations, N for relu2.
inline int64_t w13_rows(const LayerConfig& c, int64_t n) { return is_gated(c.activation) ? 2 * n : n; }

// Names as in the layer file contract ("bf16", "fp8-block", "gate_up", "silu", ...).
const char* format_name(Format f);
const char* activation_name(Activation a);
const char* gate_up_order_name(GateUpOrder o);
const char* act_dtype_name(ActDtype a);
bool format_from_name(const std::string& s, Format* out);
bool activation_from_name(const std::string& s, Activation* out);
bool gate_up_order_from_name(const std::string& s, GateUpOrder* out);
bool act_dtype_from_name(const std::string& s, ActDtype* out);

// Block sizes of the formats.
constexpr int64_t kFp8BlockSize = 128;  // fp8-block weights 128x128, activations 1x128
constexpr int64_t kW4A8GroupSize = 128;
constexpr int64_t kMxfp4BlockSize = 32;
constexpr int64_t kNvfp4BlockSize = 16;

}  // namespace fusedmoe
