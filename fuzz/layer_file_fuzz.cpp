// libFuzzer target: arbitrary bytes -> parse_safetensors -> layer and input file readers.
// The only acceptable failure is fusedmoe::Error; anything else escaping (std::bad_alloc,
// std::out_of_range, a sanitizer report) is a bug. Inputs that parse must also round-trip:
// what the readers accept, the writers write, and the readers accept again unchanged.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fusedmoe/error.hpp"
#include "fusedmoe/layer_file.hpp"

using namespace fusedmoe;

namespace {

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "round-trip invariant broken: %s\n", what);
  std::abort();
}

bool same(const HostTensor& a, const HostTensor& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.bytes == b.bytes;
}

bool same(const std::map<std::string, HostTensor>& a, const std::map<std::string, HostTensor>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& kv : a) {
    auto it = b.find(kv.first);
    if (it == b.end() || !same(kv.second, it->second)) return false;
  }
  return true;
}

Safetensors reparse(const Safetensors& st, const char* what) {
  const std::vector<uint8_t> img = serialize_safetensors(st);
  try {
    return parse_safetensors(img.data(), img.size(), what);
  } catch (const Error&) {
    bug(what);
  }
}

void check_layer(const Safetensors& st) {
  LayerFile lf;
  try {
    lf = layer_from_safetensors(st, "fuzz");
  } catch (const Error&) {
    return;
  }
  const LayerWeights w = lf.weights();
  if (!w.w13_weight.present() || !w.w2_weight.present()) bug("layer without weights");
  LayerFile back;
  try {
    back = layer_from_safetensors(reparse(layer_to_safetensors(lf), "layer image"), "layer again");
  } catch (const Error&) {
    bug("layer rewrite");
  }
  const LayerConfig &a = lf.config, &b = back.config;
  if (a.format != b.format || a.activation != b.activation || a.gate_up_order != b.gate_up_order ||
      a.interleaved != b.interleaved || a.swiglu_alpha != b.swiglu_alpha || a.swiglu_limit != b.swiglu_limit ||
      a.act_dtype != b.act_dtype || lf.num_experts != back.num_experts || lf.hidden != back.hidden ||
      lf.inter != back.inter || !same(lf.tensors, back.tensors))
    bug("layer changed by a rewrite");
}

void check_input(const Safetensors& st) {
  InputFile in;
  try {
    in = input_from_safetensors(st, "fuzz");
  } catch (const Error&) {
    return;
  }
  InputFile back;
  try {
    back = input_from_safetensors(reparse(input_to_safetensors(in), "input image"), "input again");
  } catch (const Error&) {
    bug("input rewrite");
  }
  if (!same(in.hidden_states, back.hidden_states) || !same(in.topk_ids, back.topk_ids) ||
      !same(in.topk_weights, back.topk_weights) || in.has_expert_map != back.has_expert_map ||
      !same(in.expert_map, back.expert_map) || in.apply_router_weight_on_input != back.apply_router_weight_on_input)
    bug("input changed by a rewrite");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Safetensors st;
  try {
    st = parse_safetensors(data, size, "fuzz");
  } catch (const Error&) {
    return 0;
  }
  const Safetensors again = reparse(st, "safetensors image");
  if (again.metadata != st.metadata || !same(again.tensors, st.tensors)) bug("safetensors changed by a rewrite");
  check_layer(st);
  check_input(st);
  return 0;
}
