// The input and output files of the contract (docs/LAYER_FILE.md): one batch of tokens with
// their routing, and the layer's output. Same policy as the layer file: every name, key, dtype
// and shape is checked, and writers go through the reader's check.
#include "fusedmoe/error.hpp"
#include "fusedmoe/layer_file.hpp"
#include "io/io_internal.hpp"
#include "io/metadata.hpp"

namespace fusedmoe {
namespace {

using detail::TensorRefs;

[[noreturn]] void fail(const std::string& what, const std::string& msg) { throw Error(what + ": " + msg); }

std::string got(const HostTensor& t) { return std::string(dtype_name(t.dtype)) + " " + detail::shape_string(t.shape); }

bool is_activation_dtype(DType d) { return d == DType::BF16 || d == DType::F16 || d == DType::F32; }

// Validates the tensors and returns apply_router_weight_on_input.
bool check_input(const std::map<std::string, std::string>& md, const TensorRefs& t, const std::string& what) {
  bool apply = false;
  for (const auto& kv : md) {
    if (kv.first != "apply_router_weight_on_input")
      fail(what, "unknown metadata key '" + kv.first + "' (the input file knows apply_router_weight_on_input)");
    if (!detail::parse_bool_value(kv.second, &apply))
      fail(what, detail::bad_value(kv.first, kv.second, "true, false"));
  }
  for (const auto& kv : t)
    if (kv.first != "hidden_states" && kv.first != "topk_ids" && kv.first != "topk_weights" && kv.first != "expert_map")
      fail(what, "unknown tensor '" + kv.first + "' (the input file knows hidden_states, topk_ids, topk_weights, expert_map)");
  auto need = [&](const char* name) -> const HostTensor& {
    auto it = t.find(name);
    if (it == t.end()) fail(what, std::string("missing tensor '") + name + "'");
    return *it->second;
  };

  const HostTensor& x = need("hidden_states");
  if (!is_activation_dtype(x.dtype) || x.shape.size() != 2 || x.shape[1] < 1)
    fail(what, "tensor 'hidden_states': expected BF16, F16 or F32 [M,K] with K >= 1, got " + got(x));
  const int64_t M = x.shape[0];
  const HostTensor& ids = need("topk_ids");
  if (ids.dtype != DType::I32 || ids.shape.size() != 2 || ids.shape[0] != M || ids.shape[1] < 1)
    fail(what, "tensor 'topk_ids': expected I32 [" + std::to_string(M) + ",topk] with topk >= 1, got " + got(ids));
  const std::vector<int64_t> mk = {M, ids.shape[1]};
  const HostTensor& w = need("topk_weights");
  if (w.dtype != DType::F32 || w.shape != mk)
    fail(what, "tensor 'topk_weights': expected F32 " + detail::shape_string(mk) + ", got " + got(w));
  auto em = t.find("expert_map");
  if (em != t.end()) {
    const HostTensor& m = *em->second;
    if (m.dtype != DType::I32 || m.shape.size() != 1 || m.shape[0] < 1)
      fail(what, "tensor 'expert_map': expected I32 [E_global] with E_global >= 1, got " + got(m));
  }
  return apply;
}

}  // namespace

InputFile input_from_safetensors(const Safetensors& st, const std::string& what) {
  TensorRefs refs;
  for (const auto& kv : st.tensors) refs[kv.first] = &kv.second;
  InputFile in;
  in.apply_router_weight_on_input = check_input(st.metadata, refs, what);
  in.hidden_states = st.tensors.at("hidden_states");
  in.topk_ids = st.tensors.at("topk_ids");
  in.topk_weights = st.tensors.at("topk_weights");
  auto em = st.tensors.find("expert_map");
  in.has_expert_map = em != st.tensors.end();
  if (in.has_expert_map) in.expert_map = em->second;
  return in;
}

namespace {
// The file's tensors and metadata for `in` (checked like a file that was read).
std::map<std::string, std::string> input_refs(const InputFile& in, TensorRefs* refs, const std::string& what) {
  (*refs)["hidden_states"] = &in.hidden_states;
  (*refs)["topk_ids"] = &in.topk_ids;
  (*refs)["topk_weights"] = &in.topk_weights;
  if (in.has_expert_map) (*refs)["expert_map"] = &in.expert_map;
  std::map<std::string, std::string> md{{"apply_router_weight_on_input", in.apply_router_weight_on_input ? "true" : "false"}};
  check_input(md, *refs, what);
  return md;
}
}  // namespace

Safetensors input_to_safetensors(const InputFile& in) {
  TensorRefs refs;
  Safetensors st;
  st.metadata = input_refs(in, &refs, "input");
  for (const auto& kv : refs) st.tensors[kv.first] = *kv.second;
  return st;
}

InputFile read_input_file(const std::string& path) { return input_from_safetensors(read_safetensors(path), "'" + path + "'"); }

void write_input_file(const std::string& path, const InputFile& in) {
  TensorRefs refs;
  const auto md = input_refs(in, &refs, "'" + path + "'");
  detail::write_safetensors_refs(path, md, refs);
}

void write_output_file(const std::string& path, const HostTensor& output) {
  if (!is_activation_dtype(output.dtype) || output.shape.size() != 2)
    fail("'" + path + "'", "tensor 'output': expected BF16, F16 or F32 [M,K], got " + got(output));
  detail::write_safetensors_refs(path, {}, {{"output", &output}});
}

}  // namespace fusedmoe
