// The layer file contract (docs/LAYER_FILE.md): metadata keys, tensor names, dtypes and shapes.
// Reading and writing go through the same check, so we never write a file we would refuse.
// Policy for keys that apply to some layers only (interleaved, swiglu_*, act_dtype): on a layer they
// do not apply to, the key is accepted only with its default value (a writer that always states
// the defaults means nothing else); any other value is an error, never guessed at.
#include <charconv>
#include <cmath>
#include <cstring>
#include <set>

#include "core/backend.hpp"
#include "fusedmoe/error.hpp"
#include "fusedmoe/layer_file.hpp"
#include "io/io_internal.hpp"
#include "io/metadata.hpp"

namespace fusedmoe {
namespace {

using detail::TensorRefs;

[[noreturn]] void fail(const std::string& what, const std::string& msg) { throw Error(what + ": " + msg); }

const char* const kTensorNames[] = {"w13_weight",         "w2_weight",         "w13_weight_scale",
                                    "w2_weight_scale",    "w13_weight_scale_2", "w2_weight_scale_2",
                                    "w13_input_scale",    "w2_input_scale",    "w13_bias",
                                    "w2_bias"};
const char* const kMetadataKeys[] = {"format",       "activation",   "gate_up_order", "interleaved",
                                     "swiglu_alpha", "swiglu_limit", "act_dtype"};

bool is_4bit(Format f) { return f == Format::W4A8_INT4 || f == Format::MXFP4 || f == Format::NVFP4; }

std::string list_names(const char* const* names, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::string(names[i]);
  return s;
}

LayerConfig parse_metadata(const std::map<std::string, std::string>& md, const std::string& what) {
  using namespace detail;
  const std::set<std::string> known(std::begin(kMetadataKeys), std::end(kMetadataKeys));
  for (const auto& kv : md)
    if (!known.count(kv.first))
      fail(what, "unknown metadata key '" + kv.first + "' (the layer file knows " +
                     list_names(kMetadataKeys, std::size(kMetadataKeys)) + ")");
  auto key = [&](const char* k) -> const std::string* {
    auto it = md.find(k);
    return it == md.end() ? nullptr : &it->second;
  };

  LayerConfig c;
  const std::string* v = key("format");
  if (!v) fail(what, "missing metadata key 'format'");
  if (!format_from_name(*v, &c.format))
    fail(what, bad_value("format", *v, "bf16, fp16, fp32, fp8-tensor, fp8-channel, fp8-block, w4a8-int4, mxfp4, nvfp4"));
  if (!(v = key("activation"))) fail(what, "missing metadata key 'activation'");
  if (!activation_from_name(*v, &c.activation))
    fail(what, bad_value("activation", *v, "silu, gelu, gelu_tanh, relu2, swigluoai"));
  if ((v = key("gate_up_order")) && !gate_up_order_from_name(*v, &c.gate_up_order))
    fail(what, bad_value("gate_up_order", *v, "gate_up, up_gate"));

  const bool oai = c.activation == Activation::SWIGLUOAI;
  const std::string act = std::string("(activation is ") + activation_name(c.activation) + ")";
  if ((v = key("interleaved"))) {
    if (!parse_bool_value(*v, &c.interleaved)) fail(what, bad_value("interleaved", *v, "true, false"));
    if (!oai && c.interleaved) fail(what, "metadata key 'interleaved' = true applies only to activation swigluoai " + act);
  }
  for (const char* k : {"swiglu_alpha", "swiglu_limit"}) {
    if (!(v = key(k))) continue;
    float* dst = std::strcmp(k, "swiglu_alpha") == 0 ? &c.swiglu_alpha : &c.swiglu_limit;
    const float dflt = *dst;
    if (!parse_decimal_value(*v, dst)) fail(what, bad_value(k, *v, "a finite decimal number"));
    if (!oai && *dst != dflt)
      fail(what, std::string("metadata key '") + k + "' other than its default applies only to activation swigluoai " + act);
  }
  if (oai && !(c.swiglu_limit > 0.0f))
    fail(what, bad_value("swiglu_limit", format_decimal(c.swiglu_limit), "a positive number"));

  if ((v = key("act_dtype"))) {
    if (c.format == Format::MXFP4) {
      if (!act_dtype_from_name(*v, &c.act_dtype) || c.act_dtype == ActDtype::NVFP4)
        fail(what, bad_value("act_dtype", *v, "bf16 or fp8 for format mxfp4"));
    } else if (c.format == Format::NVFP4) {
      if (!act_dtype_from_name(*v, &c.act_dtype) || c.act_dtype == ActDtype::FP8)
        fail(what, bad_value("act_dtype", *v, "bf16 or nvfp4 for format nvfp4"));
    } else if (*v != "bf16") {
      fail(what, std::string("metadata key 'act_dtype' other than bf16 applies only to formats mxfp4 and nvfp4 (format is ") +
                     format_name(c.format) + ")");
    }
  }
  return c;  // weight_scale_layout stays LINEAR: scales in files are always linear
}

// What the contract expects of one tensor for this layer.
struct Spec {
  DType dtype;
  std::vector<int64_t> shape;
  bool required;
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The contract's table, for one format and one set of sizes. Names missing here are not part of
// this layer (unknown, or belonging to another format).
std::map<std::string, Spec> layer_specs(const LayerConfig& c, int64_t E, int64_t K, int64_t N, int64_t R) {
  std::map<std::string, Spec> s;
  const bool nvfp4_act = c.format == Format::NVFP4 && c.act_dtype == ActDtype::NVFP4;
  switch (c.format) {
    case Format::BF16: case Format::FP16: case Format::FP32: {
      const DType d = c.format == Format::BF16 ? DType::BF16 : c.format == Format::FP16 ? DType::F16 : DType::F32;
      s["w13_weight"] = {d, {E, R, K}, true};
      s["w2_weight"] = {d, {E, K, N}, true};
      break;
    }
    case Format::FP8_TENSOR:
      s["w13_weight"] = {DType::F8_E4M3, {E, R, K}, true};
      s["w2_weight"] = {DType::F8_E4M3, {E, K, N}, true};
      s["w13_weight_scale"] = {DType::F32, {E}, true};
      s["w2_weight_scale"] = {DType::F32, {E}, true};
      s["w13_input_scale"] = {DType::F32, {1}, false};
      s["w2_input_scale"] = {DType::F32, {1}, false};
      break;
    case Format::FP8_CHANNEL:
      s["w13_weight"] = {DType::F8_E4M3, {E, R, K}, true};
      s["w2_weight"] = {DType::F8_E4M3, {E, K, N}, true};
      s["w13_weight_scale"] = {DType::F32, {E, R}, true};
      s["w2_weight_scale"] = {DType::F32, {E, K}, true};
      break;
    case Format::FP8_BLOCK:
      s["w13_weight"] = {DType::F8_E4M3, {E, R, K}, true};
      s["w2_weight"] = {DType::F8_E4M3, {E, K, N}, true};
      s["w13_weight_scale"] = {DType::F32, {E, ceil_div(R, 128), ceil_div(K, 128)}, true};
      s["w2_weight_scale"] = {DType::F32, {E, ceil_div(K, 128), ceil_div(N, 128)}, true};
      break;
    case Format::W4A8_INT4:
      s["w13_weight"] = {DType::U8, {E, R, K / 2}, true};
      s["w2_weight"] = {DType::U8, {E, K, N / 2}, true};
      s["w13_weight_scale"] = {DType::BF16, {E, R, K / kW4A8GroupSize}, true};
      s["w2_weight_scale"] = {DType::BF16, {E, K, N / kW4A8GroupSize}, true};
      break;
    case Format::MXFP4:
      s["w13_weight"] = {DType::U8, {E, R, K / 2}, true};
      s["w2_weight"] = {DType::U8, {E, K, N / 2}, true};
      s["w13_weight_scale"] = {DType::U8, {E, R, K / kMxfp4BlockSize}, true};
      s["w2_weight_scale"] = {DType::U8, {E, K, N / kMxfp4BlockSize}, true};
      break;
    case Format::NVFP4:
      s["w13_weight"] = {DType::U8, {E, R, K / 2}, true};
      s["w2_weight"] = {DType::U8, {E, K, N / 2}, true};
      s["w13_weight_scale"] = {DType::F8_E4M3, {E, R, K / kNvfp4BlockSize}, true};
      s["w2_weight_scale"] = {DType::F8_E4M3, {E, K, N / kNvfp4BlockSize}, true};
      s["w13_weight_scale_2"] = {DType::F32, {E}, true};
      s["w2_weight_scale_2"] = {DType::F32, {E}, true};
      if (nvfp4_act) {
        s["w13_input_scale"] = {DType::F32, {E}, true};
        s["w2_input_scale"] = {DType::F32, {E}, true};
      }
      break;
  }
  s["w13_bias"] = {DType::F32, {E, R}, false};
  s["w2_bias"] = {DType::F32, {E, K}, false};
  return s;
}

// Why a contract tensor is not part of this layer (for the error message).
std::string not_part_reason(const std::string& name, const LayerConfig& c) {
  const std::string f = format_name(c.format);
  if (name.find("input_scale") != std::string::npos)
    return c.format == Format::NVFP4 ? "input scales belong to nvfp4 only with act_dtype=nvfp4"
                                     : "input scales belong to fp8-tensor and nvfp4 (act_dtype=nvfp4) only";
  if (name.find("scale_2") != std::string::npos) return "scale_2 belongs to nvfp4 only";
  return "format " + f + " has no weight scales";
}

int64_t block_of(Format f) {
  switch (f) {
    case Format::W4A8_INT4: return kW4A8GroupSize;
    case Format::MXFP4: return kMxfp4BlockSize;
    case Format::NVFP4: return kNvfp4BlockSize;
    default: return 1;
  }
}

struct Checked {
  LayerConfig config;
  int64_t E = 0, K = 0, N = 0;
};

LayerWeights weights_of(const TensorRefs& t) {
  LayerWeights w;
  auto v = [&](const char* n) {
    auto it = t.find(n);
    return it == t.end() ? TensorView{} : it->second->view();
  };
  w.w13_weight = v("w13_weight");
  w.w2_weight = v("w2_weight");
  w.w13_weight_scale = v("w13_weight_scale");
  w.w2_weight_scale = v("w2_weight_scale");
  w.w13_weight_scale_2 = v("w13_weight_scale_2");
  w.w2_weight_scale_2 = v("w2_weight_scale_2");
  w.w13_input_scale = v("w13_input_scale");
  w.w2_input_scale = v("w2_input_scale");
  w.w13_bias = v("w13_bias");
  w.w2_bias = v("w2_bias");
  return w;
}

// The whole contract check, on tensors by reference (shared by the reader and the writers).
Checked check_layer(const std::map<std::string, std::string>& md, const TensorRefs& tensors, const std::string& what) {
  Checked r;
  r.config = parse_metadata(md, what);
  const LayerConfig& c = r.config;
  const std::set<std::string> contract(std::begin(kTensorNames), std::end(kTensorNames));
  for (const auto& kv : tensors)
    if (!contract.count(kv.first))
      fail(what, "unknown tensor '" + kv.first + "' (the layer file knows " +
                     list_names(kTensorNames, std::size(kTensorNames)) + ")");

  // E, K, N come from w2_weight [E, K, N] (4-bit: [E, K, N/2]); every other shape follows.
  auto w2 = tensors.find("w2_weight");
  if (w2 == tensors.end()) fail(what, "missing tensor 'w2_weight'");
  const std::vector<int64_t>& s2 = w2->second->shape;
  const int64_t pack = is_4bit(c.format) ? 2 : 1;
  if (s2.size() != 3)
    fail(what, std::string("tensor 'w2_weight': expected 3 dimensions ") + (pack == 2 ? "[E,K,N/2]" : "[E,K,N]") +
                   ", got " + detail::shape_string(s2));
  r.E = s2[0];
  r.K = s2[1];
  if (r.E < 1 || r.K < 1 || s2[2] < 1 || !detail::checked_mul(s2[2], pack, &r.N))
    fail(what, "tensor 'w2_weight': shape " + detail::shape_string(s2) + " needs E, K, N >= 1");
  int64_t R = r.N;
  if (is_gated(c.activation) && !detail::checked_mul(r.N, 2, &R)) fail(what, "tensor 'w2_weight': N overflows");
  const int64_t blk = block_of(c.format);
  if (pack == 2 && r.K % 2 != 0)
    fail(what, "tensor 'w2_weight': hidden size K=" + std::to_string(r.K) + " must be even for packed 4-bit " +
                   format_name(c.format));
  for (auto [dim, val] : {std::pair<const char*, int64_t>{"hidden size K", r.K}, {"intermediate size N", r.N}})
    if (val % blk != 0)
      fail(what, std::string("tensor 'w2_weight': ") + dim + "=" + std::to_string(val) + " must be a multiple of " +
                     std::to_string(blk) + " for " + format_name(c.format));
  if (c.interleaved && R % 2 != 0) fail(what, "interleaved gate/up needs an even number of w13 rows");

  const auto specs = layer_specs(c, r.E, r.K, r.N, R);
  for (const auto& kv : tensors) {
    const std::string t = "tensor '" + kv.first + "': ";
    auto sp = specs.find(kv.first);
    if (sp == specs.end()) fail(what, t + "not part of a " + format_name(c.format) + " layer (" + not_part_reason(kv.first, c) + ")");
    if (kv.second->dtype != sp->second.dtype)
      fail(what, t + "expected dtype " + dtype_name(sp->second.dtype) + ", got " + dtype_name(kv.second->dtype));
    if (kv.second->shape != sp->second.shape)
      fail(what, t + "expected shape " + detail::shape_string(sp->second.shape) + " (E=" + std::to_string(r.E) +
                     " K=" + std::to_string(r.K) + " N=" + std::to_string(r.N) + "), got " +
                     detail::shape_string(kv.second->shape));
  }
  for (const auto& sp : specs)
    if (sp.second.required && !tensors.count(sp.first))
      fail(what, "missing tensor '" + sp.first + "' (required by format " + format_name(c.format) +
                     (c.format == Format::NVFP4 && sp.first.find("input_scale") != std::string::npos ? " with act_dtype=nvfp4" : "") + ")");

  // Belt and braces: the Layer's own validation must accept what the contract accepts.
  try {
    detail::validate_layer(c, weights_of(tensors));
  } catch (const Error& e) {
    fail(what, e.what());
  }
  return r;
}

std::map<std::string, std::string> metadata_of(const LayerConfig& c) {
  // The file has no key for these: refuse rather than silently drop them.
  if (c.weight_scale_layout != ScaleLayout::LINEAR)
    throw InvalidArgument("weight_scale_layout", "linear (layer files hold linear scales)", "swizzled_128x4");
  if (c.int4_encoding != Int4Encoding::SIGNED)
    throw InvalidArgument("int4_encoding", "signed (layer files hold signed int4)", "uint4b8");
  if (c.fp8_block_ue8m0)
    throw InvalidArgument("fp8_block_ue8m0", "false (the layer file contract has no key for it)", "true");
  std::map<std::string, std::string> md;
  md["format"] = format_name(c.format);
  md["activation"] = activation_name(c.activation);
  md["gate_up_order"] = gate_up_order_name(c.gate_up_order);
  if (c.activation == Activation::SWIGLUOAI) {
    md["interleaved"] = c.interleaved ? "true" : "false";
    md["swiglu_alpha"] = detail::format_decimal(c.swiglu_alpha);
    md["swiglu_limit"] = detail::format_decimal(c.swiglu_limit);
  } else if (c.interleaved) {
    throw InvalidArgument("interleaved", "false unless activation is swigluoai", "true");
  }
  if (c.format == Format::MXFP4 || c.format == Format::NVFP4) md["act_dtype"] = act_dtype_name(c.act_dtype);
  else if (c.act_dtype != ActDtype::BF16)
    throw InvalidArgument("act_dtype", "bf16 for formats other than mxfp4/nvfp4", act_dtype_name(c.act_dtype));
  return md;
}

TensorRefs refs_of(const std::map<std::string, HostTensor>& t) {
  TensorRefs r;
  for (const auto& kv : t) r[kv.first] = &kv.second;
  return r;
}

// Checks a LayerFile before it is written: same rules as reading, plus E/K/N must agree.
std::map<std::string, std::string> checked_metadata(const LayerFile& layer, const std::string& what) {
  auto md = metadata_of(layer.config);
  const Checked c = check_layer(md, refs_of(layer.tensors), what);
  if (c.E != layer.num_experts || c.K != layer.hidden || c.N != layer.inter)
    fail(what, "num_experts/hidden/inter = " + std::to_string(layer.num_experts) + "/" + std::to_string(layer.hidden) +
                   "/" + std::to_string(layer.inter) + " disagree with the tensors (" + std::to_string(c.E) + "/" +
                   std::to_string(c.K) + "/" + std::to_string(c.N) + ")");
  return md;
}

LayerFile layer_of(const Checked& c) {
  LayerFile lf;
  lf.config = c.config;
  lf.num_experts = c.E;
  lf.hidden = c.K;
  lf.inter = c.N;
  return lf;
}

}  // namespace

LayerWeights LayerFile::weights() const { return weights_of(refs_of(tensors)); }

LayerFile layer_from_safetensors(const Safetensors& st, const std::string& what) {
  LayerFile lf = layer_of(check_layer(st.metadata, refs_of(st.tensors), what));  // before copying
  lf.tensors = st.tensors;
  return lf;
}

Safetensors layer_to_safetensors(const LayerFile& layer) {
  Safetensors st;
  st.metadata = checked_metadata(layer, "layer");
  st.tensors = layer.tensors;
  return st;
}

LayerFile read_layer_file(const std::string& path) {
  Safetensors st = read_safetensors(path);
  LayerFile lf = layer_of(check_layer(st.metadata, refs_of(st.tensors), "'" + path + "'"));
  lf.tensors = std::move(st.tensors);  // no copy: layers can be gigabytes
  return lf;
}

void write_layer_file(const std::string& path, const LayerFile& layer) {
  detail::write_safetensors_refs(path, checked_metadata(layer, "'" + path + "'"), refs_of(layer.tensors));
}

}  // namespace fusedmoe
