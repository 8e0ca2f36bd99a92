#include "presets.hpp"

#include <cstdlib>
#include <sstream>

#include "model_shapes.hpp"

namespace fmbench {

using fusedmoe::ActDtype;
using fusedmoe::Activation;
using fusedmoe::DType;
using fusedmoe::Format;

std::vector<Shape> builtin_presets() {
  // (model of tools/common/model_shapes.hpp, tensor-parallel degree, preset name, extra note).
  struct Entry {
    const char* model;
    int64_t tp;
    const char* name;
    const char* extra;
    bool interleaved = false;
  };
  const Entry entries[] = {
      {"mixtral-8x7b", 1, "mixtral-8x7b", nullptr},
      {"qwen3-30b-a3b", 1, "qwen3-30b-a3b-tp1", nullptr},
      {"qwen3-30b-a3b", 4, "qwen3-30b-a3b-tp4", nullptr},
      {"qwen3-235b-a22b", 8, "qwen3-235b-a22b-tp8", nullptr},
      {"deepseek-v3", 1, "deepseek-v3-tp1", nullptr},
      {"deepseek-v3", 8, "deepseek-v3-tp8", nullptr},
      // The benchmark runs gpt-oss with halves [gate; up] (the checkpoint interleaves them; the
      // GEMMs are the same, only the activation reads its inputs elsewhere).
      {"gpt-oss-120b", 1, "gpt-oss-120b", "swigluoai (alpha 1.702, limit 7), halves [gate; up], biases"},
      // ... and with the checkpoint's interleaved rows [g0, u0, g1, u1, ..] (bf16 / static
      // fp8-tensor layers run the activation inside GEMM1 at large batches in either order; the
      // 4-bit formats keep it a separate stage).
      {"gpt-oss-120b", 1, "gpt-oss-120b-interleaved", "swigluoai (alpha 1.702, limit 7), interleaved gate / up rows, biases", true},
      {"llama4-scout", 1, "llama4-scout", "top-1, router weight applied on the input"},
      // The GPU-path presets with interleaved gate / up rows: same GEMMs and bytes as the halves
      // presets; bf16 and static fp8-tensor layers run the activation in GEMM1's epilogue at
      // large batches in both layouts (sm90_gemm1_act_applies), paired differently.
      {"mixtral-8x7b", 1, "mixtral-8x7b-interleaved", "interleaved gate / up rows", true},
      {"qwen3-30b-a3b", 1, "qwen3-30b-a3b-tp1-interleaved", "interleaved gate / up rows", true},
      {"deepseek-v3", 1, "deepseek-v3-tp1-interleaved", "interleaved gate / up rows", true},
      {"deepseek-v3", 8, "deepseek-v3-tp8-interleaved", "interleaved gate / up rows", true},
  };
  std::vector<Shape> p;
  for (const Entry& en : entries) {
    const fusedmoe::tools::ModelShape& m = *fusedmoe::tools::find_model_shape(en.model);
    Shape s;
    s.name = en.name;
    s.E = m.num_experts;
    s.topk = m.topk;
    s.K = m.hidden;
    s.N = m.inter / en.tp;
    s.activation = m.activation;
    s.bias = m.bias;
    s.router_weight_on_input = m.router_weight_on_input;
    s.interleaved = en.interleaved;
    s.note = std::string(m.description) + ", TP" + std::to_string(en.tp);
    if (en.tp > 1) s.note += " (N = " + std::to_string(m.inter) + "/" + std::to_string(en.tp) + ")";
    if (en.extra) s.note += std::string(", ") + en.extra;
    p.push_back(s);
  }
  return p;
}

std::vector<std::string> split_list(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream is(s);
  while (std::getline(is, cur, sep)) {
    // trim
    const auto b = cur.find_first_not_of(" \t");
    const auto e = cur.find_last_not_of(" \t");
    if (b == std::string::npos) continue;
    out.push_back(cur.substr(b, e - b + 1));
  }
  return out;
}

namespace {
bool parse_i64(const std::string& v, int64_t* out) {
  if (v.empty()) return false;
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (end == nullptr || *end != '\0') return false;
  *out = x;
  return true;
}
bool parse_bool(const std::string& v, bool* out) {
  if (v == "1" || v == "true" || v == "yes") return *out = true, true;
  if (v == "0" || v == "false" || v == "no") return *out = false, true;
  return false;
}
}  // namespace

bool parse_shape_spec(const std::string& spec, Shape* out, std::string* err) {
  Shape s;
  s.name = "custom";
  s.note = "custom shape";
  bool haveE = false, haveTopk = false, haveK = false, haveN = false;
  for (const std::string& kv : split_list(spec, ',')) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos) return *err = "expected key=value, got '" + kv + "'", false;
    const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    int64_t x = 0;
    if (k == "name") {
      if (v.empty() || v.find_first_of(" /\\,") != std::string::npos)
        return *err = "name must be non-empty without spaces, slashes or commas", false;
      s.name = v;
    } else if (k == "E" || k == "topk" || k == "K" || k == "N" || k == "ep") {
      if (!parse_i64(v, &x) || x < 1) return *err = k + " must be a positive integer, got '" + v + "'", false;
      if (k == "E") s.E = x, haveE = true;
      if (k == "topk") s.topk = x, haveTopk = true;
      if (k == "K") s.K = x, haveK = true;
      if (k == "N") s.N = x, haveN = true;
      if (k == "ep") s.ep = x;
    } else if (k == "act") {
      if (!fusedmoe::activation_from_name(v, &s.activation)) return *err = "unknown activation '" + v + "'", false;
    } else if (k == "bias") {
      if (!parse_bool(v, &s.bias)) return *err = "bias must be 0 or 1", false;
    } else if (k == "router_on_input") {
      if (!parse_bool(v, &s.router_weight_on_input)) return *err = "router_on_input must be 0 or 1", false;
    } else if (k == "interleaved") {
      if (!parse_bool(v, &s.interleaved)) return *err = "interleaved must be 0 or 1", false;
    } else if (k == "note") {
      s.note = v;
    } else {
      return *err = "unknown key '" + k + "' (name, E, topk, K, N, act, bias, router_on_input, interleaved, ep, note)", false;
    }
  }
  if (!haveE || !haveTopk || !haveK || !haveN) return *err = "E, topk, K and N are required", false;
  if (s.topk > s.E) return *err = "topk must be <= E", false;
  if (s.E % s.ep != 0) return *err = "E must be a multiple of ep", false;
  *out = s;
  return true;
}

std::string shape_to_spec(const Shape& s) {
  std::ostringstream os;
  os << "name=" << s.name << ",E=" << s.E << ",topk=" << s.topk << ",K=" << s.K << ",N=" << s.N
     << ",act=" << fusedmoe::activation_name(s.activation) << ",bias=" << (s.bias ? 1 : 0)
     << ",router_on_input=" << (s.router_weight_on_input ? 1 : 0) << ",ep=" << s.ep;
  if (s.interleaved) os << ",interleaved=1";
  return os.str();
}

DType FormatVariant::hidden_dtype() const {
  if (format == Format::FP16) return DType::F16;
  if (format == Format::FP32) return DType::F32;
  return DType::BF16;
}

std::string FormatVariant::rate_class() const {
  switch (format) {
    case Format::BF16: case Format::FP16: return "bf16";
    case Format::FP32: return "fp32";
    case Format::FP8_TENSOR: case Format::FP8_CHANNEL: case Format::FP8_BLOCK: return "fp8";
    // w4a8's large-batch GEMM runs on the fp8 tensor cores (int4 decoded to e4m3 codes,
    // w4_gemm.hpp; its decode kernel uses 16-bit mma.sync, where the weight stream bounds it).
    case Format::W4A8_INT4: return "fp8";
    // mxfp4 / nvfp4 run on 16-bit tensor cores (weights decoded exactly to bf16), whatever the
    // activation type.
    case Format::MXFP4: case Format::NVFP4: return "bf16";
  }
  return "bf16";
}

double FormatVariant::tolerance() const {
  switch (format) {
    case Format::BF16: case Format::FP16: return 2e-2;
    case Format::FP32: return 1e-4;
    case Format::FP8_TENSOR: case Format::FP8_CHANNEL: case Format::FP8_BLOCK: case Format::W4A8_INT4: return 6e-2;
    case Format::MXFP4: return act_dtype == ActDtype::FP8 ? 6e-2 : 2e-2;
    case Format::NVFP4: return act_dtype == ActDtype::NVFP4 ? 1e-1 : 2e-2;
  }
  return 2e-2;
}

std::vector<FormatVariant> all_format_variants() {
  return {
      {"bf16", Format::BF16, ActDtype::BF16},
      {"fp16", Format::FP16, ActDtype::BF16},
      {"fp32", Format::FP32, ActDtype::BF16},
      {"fp8-tensor", Format::FP8_TENSOR, ActDtype::BF16},
      {"fp8-channel", Format::FP8_CHANNEL, ActDtype::BF16},
      {"fp8-block", Format::FP8_BLOCK, ActDtype::BF16},
      {"w4a8-int4", Format::W4A8_INT4, ActDtype::BF16},
      {"mxfp4", Format::MXFP4, ActDtype::BF16},
      {"mxfp4-fp8", Format::MXFP4, ActDtype::FP8},
      {"nvfp4", Format::NVFP4, ActDtype::BF16},
      {"nvfp4-w4a4", Format::NVFP4, ActDtype::NVFP4},
  };
}

bool find_format_variant(const std::string& name, FormatVariant* out) {
  for (const FormatVariant& f : all_format_variants())
    if (f.name == name) return *out = f, true;
  return false;
}

}  // namespace fmbench
