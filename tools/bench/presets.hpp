#pragma once
// Model presets (real MoE shapes), custom shapes, and the format variants the benchmark tries.
#include <cstdint>
#include <string>
#include <vector>

#include "fusedmoe/config.hpp"
#include "fusedmoe/tensor.hpp"

namespace fmbench {

struct Shape {
  std::string name;
  int64_t E = 0;     // global experts (the routing's range)
  int64_t topk = 0;
  int64_t K = 0;     // hidden size
  int64_t N = 0;     // intermediate size per expert (after tensor-parallel sharding)
  fusedmoe::Activation activation = fusedmoe::Activation::SILU;
  bool bias = false;                  // w13_bias / w2_bias (gpt-oss has them)
  bool router_weight_on_input = false;  // apply_router_weight_on_input (Llama 4, top-1)
  bool interleaved = false;           // gate / up rows alternate (gpt-oss as vLLM loads its checkpoint)
  int64_t ep = 1;  // expert-parallel ranks: this rank holds global experts [0, E/ep), expert_map
  std::string note;

  int64_t local_experts() const { return E / ep; }
  int64_t w13_rows() const { return fusedmoe::is_gated(activation) ? 2 * N : N; }
  // Multiply-adds of one valid (token, expert) slot: R*K + K*N.
  int64_t macs_per_slot() const { return w13_rows() * K + K * N; }
};

std::vector<Shape> builtin_presets();
// "name=foo,E=64,topk=6,K=2048,N=1408[,act=silu][,bias=1][,router_on_input=1][,interleaved=1][,ep=2]".
// Returns false and sets *err on a malformed spec.
bool parse_shape_spec(const std::string& spec, Shape* out, std::string* err);
std::string shape_to_spec(const Shape& s);

// One format as the benchmark runs it (a Format plus, for the 4-bit formats, the activation type).
struct FormatVariant {
  std::string name;  // "bf16", "fp8-tensor", "mxfp4-fp8", "nvfp4-w4a4", ...
  fusedmoe::Format format = fusedmoe::Format::BF16;
  fusedmoe::ActDtype act_dtype = fusedmoe::ActDtype::BF16;

  fusedmoe::DType hidden_dtype() const;  // F16 for fp16, F32 for fp32, else BF16
  // The tensor-core operand type whose measured matmul rate bounds this format:
  // "bf16" (bf16, fp16, mxfp4 / nvfp4 whatever the activation type: Hopper has no FP4 MMA and an
  // e2m1 value times its e4m3 / e8m0 scale is exact in bf16), "fp8" (fp8-*, w4a8-int4: int4 is
  // exact in e4m3), "fp32".
  std::string rate_class() const;
  // Relative Frobenius tolerance against the float64 oracle, by activation operand type:
  // bf16/fp16 2e-2, fp32 1e-4, fp8 6e-2, nvfp4 1e-1.
  double tolerance() const;
};

std::vector<FormatVariant> all_format_variants();
bool find_format_variant(const std::string& name, FormatVariant* out);

// Comma-separated list helpers.
std::vector<std::string> split_list(const std::string& s, char sep = ',');

}  // namespace fmbench
