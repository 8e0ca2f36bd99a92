// fusedmoe::Layer for Python: the weights are viewed (not copied) through DLPack and kept alive
// by the Python object for as long as the Layer lives.
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

#include "bindings.hpp"
#include "tensor_args.hpp"

namespace fmpy {

using namespace fusedmoe;

namespace {

const char* const kWeightNames[] = {"w13_weight",         "w2_weight",         "w13_weight_scale", "w2_weight_scale",
                                    "w13_weight_scale_2", "w2_weight_scale_2", "w13_input_scale",  "w2_input_scale",
                                    "w13_bias",           "w2_bias"};

TensorView* weight_slot(LayerWeights& w, const std::string& name) {
  if (name == "w13_weight") return &w.w13_weight;
  if (name == "w2_weight") return &w.w2_weight;
  if (name == "w13_weight_scale") return &w.w13_weight_scale;
  if (name == "w2_weight_scale") return &w.w2_weight_scale;
  if (name == "w13_weight_scale_2") return &w.w13_weight_scale_2;
  if (name == "w2_weight_scale_2") return &w.w2_weight_scale_2;
  if (name == "w13_input_scale") return &w.w13_input_scale;
  if (name == "w2_input_scale") return &w.w2_input_scale;
  if (name == "w13_bias") return &w.w13_bias;
  if (name == "w2_bias") return &w.w2_bias;
  return nullptr;
}

}  // namespace

// The contract's dtype of each weight tensor (docs/LAYER_FILE.md): raw unsigned-integer bits of
// that size are accepted as it (NumPy has no bf16 / fp8 dtypes; FlashInfer passes int32/int64 views).
DType contract_dtype(const LayerConfig& c, const std::string& name) {
  const bool weight = name == "w13_weight" || name == "w2_weight";
  const bool scale = name == "w13_weight_scale" || name == "w2_weight_scale";
  switch (c.format) {
    case Format::BF16: return weight ? DType::BF16 : DType::F32;
    case Format::FP16: return weight ? DType::F16 : DType::F32;
    case Format::FP32: return DType::F32;
    case Format::FP8_TENSOR: case Format::FP8_CHANNEL: case Format::FP8_BLOCK:
      return weight ? DType::F8_E4M3 : DType::F32;
    case Format::W4A8_INT4: return weight ? DType::U8 : scale ? DType::BF16 : DType::F32;
    case Format::MXFP4: return weight ? DType::U8 : scale ? DType::U8 : DType::F32;
    case Format::NVFP4: return weight ? DType::U8 : scale ? DType::F8_E4M3 : DType::F32;
  }
  return DType::F32;
}

namespace {

template <typename T>
T get_or(nb::handle d, const char* key, T fallback) {
  nb::dict dict = nb::borrow<nb::dict>(d);
  if (!dict.contains(key)) return fallback;
  nb::object v = dict[key];
  if (v.is_none()) return fallback;
  try {
    return nb::cast<T>(v);
  } catch (const nb::cast_error&) {
    throw InvalidArgument(key, std::is_same_v<T, std::string> ? "a string" : std::is_same_v<T, bool> ? "a bool" : "a number",
                          std::string("a ") + nb::type_name(v.type()).c_str());
  }
}

Backend parse_backend(const std::string& s) {
  if (s == "auto") return Backend::AUTO;
  if (s == "cpu") return Backend::CPU;
  if (s == "cuda") return Backend::CUDA;
  throw InvalidArgument("backend", "auto, cpu or cuda", "'" + s + "'");
}

CpuPrecision parse_precision(const std::string& s) {
  if (s == "fast") return CpuPrecision::FAST;
  if (s == "oracle" || s == "oracle_fp64") return CpuPrecision::ORACLE_FP64;
  throw InvalidArgument("cpu_precision", "fast or oracle", "'" + s + "'");
}

nb::dict stage_times(const StageTimes& t) {
  nb::dict d;
  d["permute_ms"] = t.permute_ms;
  d["gemm1_ms"] = t.gemm1_ms;
  d["activation_ms"] = t.activation_ms;
  d["gemm2_ms"] = t.gemm2_ms;
  d["finalize_ms"] = t.finalize_ms;
  d["total_ms"] = t.total_ms;
  return d;
}

struct PyLayer {
  // Declared before the Layer, so destroyed after it: the arrays the Layer views outlive it.
  KeepAlive weights;
  std::unique_ptr<Layer> layer;
  DeviceType device = DeviceType::CPU;
  int device_index = 0;
};

void construct(PyLayer* self, nb::dict weights, nb::dict config, const std::string& backend, int cpu_threads,
               const std::string& cpu_precision) {
  // Everything is built in locals and moved into *self only once the Layer exists: nanobind runs no
  // destructor for an __init__ that throws, so whatever sat in *self at a throw (the imported weight
  // arrays, CUDA memory included) would stay referenced for the rest of the process.
  const LayerConfig cfg = config_from_dict(config);
  KeepAlive keep;
  LayerWeights w;
  for (auto [key, value] : weights) {
    const std::string name = nb::cast<std::string>(key);
    TensorView* slot = weight_slot(w, name);
    if (!slot)
      throw InvalidArgument("weights", "names from the layer file contract (w13_weight, w2_weight, w13_weight_scale, ...)",
                            "'" + name + "'");
    TensorArgOptions opt;
    opt.has_hint = true;
    opt.hint = contract_dtype(cfg, name);
    *slot = tensor_arg(value, kWeightNames[slot - &w.w13_weight], keep, opt);
  }
  LayerOptions lo;
  lo.backend = parse_backend(backend);
  lo.cpu_threads = cpu_threads;
  lo.cpu_precision = parse_precision(cpu_precision);
  std::unique_ptr<Layer> layer;
  {
    DeviceGuard guard(w.w13_weight);
    nb::gil_scoped_release release;
    layer = std::make_unique<Layer>(cfg, w, lo);
  }
  new (self) PyLayer();
  self->weights = std::move(keep);
  self->layer = std::move(layer);
  self->device = w.w13_weight.device;
  self->device_index = w.w13_weight.device_index;
}

// A CUDA layer's run tensors and workspace must be on the layer's GPU: the library tells CPU from
// CUDA tensors for the run arguments, but not one GPU from another, and it does not know where the
// workspace is (its kernels would write into host memory, or another GPU's, if handed it).
void require_layer_device(const PyLayer& s, const TensorView& v, const char* name) {
  if (s.device != DeviceType::CUDA || !v.present()) return;
  if (v.device != DeviceType::CUDA || v.device_index != s.device_index)
    throw InvalidArgument(name, "memory on cuda:" + std::to_string(s.device_index) + " (the layer's device)",
                          device_str(v));
}

void* parse_stream(nb::handle stream) {
  if (!stream.is_valid() || stream.is_none()) return nullptr;
  try {
    return reinterpret_cast<void*>(static_cast<uintptr_t>(nb::cast<uint64_t>(stream)));
  } catch (const nb::cast_error&) {
    throw InvalidArgument("stream", "an integer cudaStream_t handle (0 = legacy default stream)",
                          std::string("a ") + nb::type_name(stream.type()).c_str());
  }
}

// The caller's workspace (on the layer's device, contiguous, writable) -> (pointer, bytes).
void workspace_arg(const PyLayer& s, nb::handle workspace, KeepAlive& keep, void** ptr, size_t* bytes) {
  TensorArgOptions wr;
  wr.writable = true;
  const TensorView ws = tensor_arg(workspace, "workspace", keep, wr);
  require_layer_device(s, ws, "workspace");
  if (ws.present()) {
    require_contiguous(ws, "workspace");
    *ptr = ws.data;
    *bytes = ws.nbytes();
  }
}

RunArgs run_args(const PyLayer& s, nb::handle x, nb::handle ids, nb::handle w, nb::handle out, nb::handle expert_map,
                 bool on_input, nb::handle x_scale, nb::handle workspace, nb::handle stream, KeepAlive& keep) {
  RunArgs a;
  a.hidden_states = required_tensor_arg(x, "hidden_states", keep);
  a.topk_ids = required_tensor_arg(ids, "topk_ids", keep);
  a.topk_weights = required_tensor_arg(w, "topk_weights", keep);
  TensorArgOptions wr;
  wr.writable = true;
  a.output = required_tensor_arg(out, "output", keep, wr);
  a.expert_map = tensor_arg(expert_map, "expert_map", keep);
  a.hidden_states_scale = tensor_arg(x_scale, "hidden_states_scale", keep);
  a.apply_router_weight_on_input = on_input;
  workspace_arg(s, workspace, keep, &a.workspace, &a.workspace_bytes);
  a.stream = parse_stream(stream);
  return a;
}

MaskedArgs masked_args(const PyLayer& s, nb::handle x, nb::handle counts, nb::handle out, nb::handle x_scale,
                       nb::handle workspace, nb::handle stream, KeepAlive& keep) {
  MaskedArgs a;
  a.hidden_states = required_tensor_arg(x, "hidden_states", keep);
  a.expert_num_tokens = required_tensor_arg(counts, "expert_num_tokens", keep);
  TensorArgOptions wr;
  wr.writable = true;
  a.output = required_tensor_arg(out, "output", keep, wr);
  a.hidden_states_scale = tensor_arg(x_scale, "hidden_states_scale", keep);
  workspace_arg(s, workspace, keep, &a.workspace, &a.workspace_bytes);
  a.stream = parse_stream(stream);
  return a;
}

// Another GPU's tensors (the library checks CPU against CUDA, not one GPU against another).
void require_on_layer_gpu(const PyLayer& s, std::initializer_list<std::pair<const TensorView*, const char*>> args) {
  if (s.device != DeviceType::CUDA) return;
  for (const auto& [v, name] : args)
    if (v->device == DeviceType::CUDA) require_layer_device(s, *v, name);
}

// A view standing for the layer's device (for DeviceGuard).
TensorView layer_device_view(const PyLayer& s) {
  TensorView v;
  v.ndim = 1;
  v.shape[0] = 1;
  v.strides[0] = 1;
  v.device = s.device;
  v.device_index = s.device_index;
  return v;
}

}  // namespace

LayerConfig config_from_dict(nb::handle d) {
  if (!nb::isinstance<nb::dict>(d)) throw InvalidArgument("config", "a dict", nb::type_name(d.type()).c_str());
  static const char* const keys[] = {"format", "activation", "gate_up_order", "interleaved", "swiglu_alpha",
                                     "swiglu_limit", "act_dtype", "fp8_block_ue8m0", "weight_scale_layout",
                                     "int4_encoding"};
  for (auto [k, v] : nb::borrow<nb::dict>(d)) {
    const std::string key = nb::cast<std::string>(k);
    bool known = false;
    for (const char* name : keys) known = known || key == name;
    if (!known) throw InvalidArgument("config", "keys format, activation, gate_up_order, interleaved, swiglu_alpha, "
                                      "swiglu_limit, act_dtype, fp8_block_ue8m0, weight_scale_layout, int4_encoding", "'" + key + "'");
  }
  LayerConfig c;
  const std::string fmt = get_or<std::string>(d, "format", "");
  if (!format_from_name(fmt, &c.format))
    throw InvalidArgument("format", "one of bf16, fp16, fp32, fp8-tensor, fp8-channel, fp8-block, w4a8-int4, mxfp4, nvfp4",
                          "'" + fmt + "'");
  const std::string act = get_or<std::string>(d, "activation", "silu");
  if (!activation_from_name(act, &c.activation))
    throw InvalidArgument("activation", "one of silu, gelu, gelu_tanh, relu2, swigluoai", "'" + act + "'");
  const std::string order = get_or<std::string>(d, "gate_up_order", "gate_up");
  if (!gate_up_order_from_name(order, &c.gate_up_order))
    throw InvalidArgument("gate_up_order", "gate_up (vLLM) or up_gate (FlashInfer)", "'" + order + "'");
  c.interleaved = get_or<bool>(d, "interleaved", false);
  c.swiglu_alpha = get_or<float>(d, "swiglu_alpha", 1.702f);
  c.swiglu_limit = get_or<float>(d, "swiglu_limit", 7.0f);
  const std::string ad = get_or<std::string>(d, "act_dtype", "bf16");
  if (!act_dtype_from_name(ad, &c.act_dtype)) throw InvalidArgument("act_dtype", "bf16, fp8 or nvfp4", "'" + ad + "'");
  c.fp8_block_ue8m0 = get_or<bool>(d, "fp8_block_ue8m0", false);
  const std::string layout = get_or<std::string>(d, "weight_scale_layout", "linear");
  if (layout == "linear") c.weight_scale_layout = ScaleLayout::LINEAR;
  else if (layout == "swizzled_128x4" || layout == "swizzled") c.weight_scale_layout = ScaleLayout::SWIZZLED_128x4;
  else throw InvalidArgument("weight_scale_layout", "linear or swizzled_128x4", "'" + layout + "'");
  const std::string enc = get_or<std::string>(d, "int4_encoding", "signed");
  if (enc == "signed") c.int4_encoding = Int4Encoding::SIGNED;
  else if (enc == "uint4b8") c.int4_encoding = Int4Encoding::UINT4B8;
  else throw InvalidArgument("int4_encoding", "signed or uint4b8", "'" + enc + "'");
  return c;
}

nb::dict config_to_dict(const LayerConfig& c) {
  nb::dict d;
  d["format"] = format_name(c.format);
  d["activation"] = activation_name(c.activation);
  d["gate_up_order"] = gate_up_order_name(c.gate_up_order);
  d["interleaved"] = c.interleaved;
  d["swiglu_alpha"] = c.swiglu_alpha;
  d["swiglu_limit"] = c.swiglu_limit;
  d["act_dtype"] = act_dtype_name(c.act_dtype);
  d["fp8_block_ue8m0"] = c.fp8_block_ue8m0;
  d["weight_scale_layout"] = c.weight_scale_layout == ScaleLayout::LINEAR ? "linear" : "swizzled_128x4";
  d["int4_encoding"] = c.int4_encoding == Int4Encoding::SIGNED ? "signed" : "uint4b8";
  return d;
}

void bind_layer(nb::module_& m) {
  nb::class_<PyLayer>(m, "Layer", "fusedmoe::Layer over DLPack weights (use fusedmoe.MoELayer).")
      .def("__init__", &construct, nb::arg("weights"), nb::arg("config"), nb::arg("backend") = "auto",
           nb::arg("cpu_threads") = 0, nb::arg("cpu_precision") = "fast")
      .def_prop_ro("backend", [](const PyLayer& s) { return std::string(backend_name(s.layer->backend())); })
      .def_prop_ro("num_experts", [](const PyLayer& s) { return s.layer->num_experts(); })
      .def_prop_ro("hidden", [](const PyLayer& s) { return s.layer->hidden(); })
      .def_prop_ro("inter", [](const PyLayer& s) { return s.layer->inter(); })
      .def_prop_ro("config", [](const PyLayer& s) { return config_to_dict(s.layer->config()); })
      .def_prop_ro("device", [](const PyLayer& s) {
        return std::make_tuple(std::string(s.device == DeviceType::CPU ? "cpu" : "cuda"), s.device_index);
      })
      .def("workspace_size", [](const PyLayer& s, int64_t max_tokens, int64_t topk) {
        return s.layer->workspace_size(max_tokens, topk);
      }, nb::arg("max_tokens"), nb::arg("topk"))
      .def("can_implement", [](const PyLayer& s, int64_t num_tokens, int64_t topk, int64_t num_global_experts) {
        Problem p;
        p.num_tokens = num_tokens;
        p.hidden = s.layer->hidden();
        p.inter = s.layer->inter();
        p.num_experts = s.layer->num_experts();
        p.num_global_experts = num_global_experts > 0 ? num_global_experts : p.num_experts;
        p.topk = topk;
        const Support sup = s.layer->can_implement(p);
        return std::make_tuple(sup.ok, sup.reason);
      }, nb::arg("num_tokens"), nb::arg("topk"), nb::arg("num_global_experts") = 0)
      .def("run", [](const PyLayer& s, nb::handle x, nb::handle ids, nb::handle w, nb::handle out, nb::handle expert_map,
                     bool on_input, nb::handle workspace, nb::handle stream, bool timed, nb::handle x_scale) -> nb::object {
        KeepAlive keep;
        const RunArgs a = run_args(s, x, ids, w, out, expert_map, on_input, x_scale, workspace, stream, keep);
        require_on_layer_gpu(s, {{&a.hidden_states, "hidden_states"}, {&a.topk_ids, "topk_ids"},
                                 {&a.topk_weights, "topk_weights"}, {&a.expert_map, "expert_map"},
                                 {&a.output, "output"}, {&a.hidden_states_scale, "hidden_states_scale"}});
        DeviceGuard guard(a.hidden_states);
        StageTimes t;
        {
          nb::gil_scoped_release release;
          if (timed) t = s.layer->run_timed(a);
          else s.layer->run(a);
        }
        if (timed) return stage_times(t);
        return nb::none();
      }, nb::arg("hidden_states"), nb::arg("topk_ids"), nb::arg("topk_weights"), nb::arg("output"),
         nb::arg("expert_map").none() = nb::none(), nb::arg("apply_router_weight_on_input") = false,
         nb::arg("workspace").none() = nb::none(), nb::arg("stream").none() = nb::none(), nb::arg("timed") = false,
         nb::arg("hidden_states_scale").none() = nb::none())
      .def("masked_workspace_size", [](const PyLayer& s, int64_t max_tokens_per_expert) {
        return s.layer->masked_workspace_size(max_tokens_per_expert);
      }, nb::arg("max_tokens_per_expert"))
      .def("can_implement_masked", [](const PyLayer& s, int64_t max_tokens_per_expert, bool prequantized) {
        MaskedProblem p;
        p.num_experts = s.layer->num_experts();
        p.max_tokens_per_expert = max_tokens_per_expert;
        p.hidden = s.layer->hidden();
        p.inter = s.layer->inter();
        p.prequantized = prequantized;
        const Support sup = s.layer->can_implement_masked(p);
        return std::make_tuple(sup.ok, sup.reason);
      }, nb::arg("max_tokens_per_expert"), nb::arg("prequantized") = false)
      .def("run_masked", [](const PyLayer& s, nb::handle x, nb::handle counts, nb::handle out, nb::handle x_scale,
                            nb::handle workspace, nb::handle stream) {
        KeepAlive keep;
        const MaskedArgs a = masked_args(s, x, counts, out, x_scale, workspace, stream, keep);
        require_on_layer_gpu(s, {{&a.hidden_states, "hidden_states"}, {&a.expert_num_tokens, "expert_num_tokens"},
                                 {&a.output, "output"}, {&a.hidden_states_scale, "hidden_states_scale"}});
        DeviceGuard guard(a.hidden_states);
        nb::gil_scoped_release release;
        s.layer->run_masked(a);
      }, nb::arg("hidden_states"), nb::arg("expert_num_tokens"), nb::arg("output"),
         nb::arg("hidden_states_scale").none() = nb::none(), nb::arg("workspace").none() = nb::none(),
         nb::arg("stream").none() = nb::none())
      .def("warmup", [](const PyLayer& s, int64_t max_tokens, int64_t topk, nb::handle stream) {
        void* st = parse_stream(stream);
        DeviceGuard guard(layer_device_view(s));
        nb::gil_scoped_release release;
        s.layer->warmup(max_tokens, topk, st);
      }, nb::arg("max_tokens"), nb::arg("topk"), nb::arg("stream").none() = nb::none());

  m.def("contract_dtype", [](nb::dict config, const std::string& name) {
    return std::string(dtype_name(contract_dtype(config_from_dict(config), name)));
  }, nb::arg("config"), nb::arg("name"), "The layer file contract's dtype of weight `name` for this config.");
}

}  // namespace fmpy
