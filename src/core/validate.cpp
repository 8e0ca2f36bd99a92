// Validation of weights and run arguments against the layer file contract.
// Every failure names the argument, the expected and the actual value.
#include <sstream>
#include <vector>

#include "core/backend.hpp"
#include "fusedmoe/error.hpp"

namespace fusedmoe::detail {
namespace {

std::string shape_of(std::initializer_list<int64_t> s) {
  std::ostringstream os;
  os << '[';
  int i = 0;
  for (int64_t v : s) os << (i++ ? "," : "") << v;
  os << ']';
  return os.str();
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

void expect_present(const TensorView& t, const char* name) {
  if (!t.present()) throw InvalidArgument(name, "a tensor", "none");
  if (t.data == nullptr && t.numel() > 0) throw InvalidArgument(name, "a non-null data pointer", "nullptr");
}

void expect_absent(const TensorView& t, const char* name, const char* why) {
  if (t.present()) throw InvalidArgument(name, std::string("no tensor (") + why + ")", "a tensor " + t.shape_str());
}

void expect_dtype(const TensorView& t, const char* name, DType d) {
  if (t.dtype != d) throw InvalidArgument(name, std::string("dtype ") + dtype_name(d), dtype_name(t.dtype));
}

void expect_shape(const TensorView& t, const char* name, std::initializer_list<int64_t> s) {
  bool ok = t.ndim == static_cast<int>(s.size());
  int i = 0;
  for (int64_t v : s) ok = ok && t.shape[i++] == v;
  if (!ok) throw InvalidArgument(name, "shape " + shape_of(s), t.shape_str());
}

void expect_contiguous(const TensorView& t, const char* name) {
  if (!t.is_contiguous()) {
    std::ostringstream os;
    os << "strides [";
    for (int i = 0; i < t.ndim; ++i) os << (i ? "," : "") << t.strides[i];
    os << "]";
    throw InvalidArgument(name, "contiguous row-major strides", os.str());
  }
}

void expect_shape(const TensorView& t, const char* name, const std::vector<int64_t>& s) {
  bool ok = t.ndim == static_cast<int>(s.size());
  for (size_t i = 0; ok && i < s.size(); ++i) ok = t.shape[i] == s[i];
  if (!ok) {
    std::ostringstream os;
    os << '[';
    for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
    os << ']';
    throw InvalidArgument(name, "shape " + os.str(), t.shape_str());
  }
}

void expect_tensor(const TensorView& t, const char* name, DType d, std::initializer_list<int64_t> s) {
  expect_present(t, name);
  expect_dtype(t, name, d);
  expect_shape(t, name, s);
  expect_contiguous(t, name);
}

void expect_multiple(int64_t v, int64_t m, const char* name) {
  if (v % m != 0) throw InvalidArgument(name, "a multiple of " + std::to_string(m), std::to_string(v));
}

bool is_4bit(Format f) { return f == Format::W4A8_INT4 || f == Format::MXFP4 || f == Format::NVFP4; }

}  // namespace

LayerShape validate_layer(const LayerConfig& c, const LayerWeights& w) {
  if (c.interleaved && c.activation == Activation::RELU2)
    throw InvalidArgument("interleaved", "false for relu2 (not a gated activation: no gate / up pairs)", "true");
  if (c.format == Format::MXFP4) {
    if (c.act_dtype == ActDtype::NVFP4) throw InvalidArgument("act_dtype", "bf16 or fp8 for mxfp4", "nvfp4");
  } else if (c.format == Format::NVFP4) {
    if (c.act_dtype == ActDtype::FP8) throw InvalidArgument("act_dtype", "bf16 or nvfp4 for nvfp4", "fp8");
  } else if (c.act_dtype != ActDtype::BF16) {
    throw InvalidArgument("act_dtype", std::string("bf16 (act_dtype applies to mxfp4/nvfp4 only) for format ") + format_name(c.format), act_dtype_name(c.act_dtype));
  }
  if (c.weight_scale_layout == ScaleLayout::SWIZZLED_128x4 && c.format != Format::MXFP4 && c.format != Format::NVFP4)
    throw InvalidArgument("weight_scale_layout", "linear for formats other than mxfp4/nvfp4", "swizzled_128x4");
  if (c.int4_encoding != Int4Encoding::SIGNED && c.format != Format::W4A8_INT4)
    throw InvalidArgument("int4_encoding", "signed for formats other than w4a8-int4", "uint4b8");
  if (c.activation == Activation::SWIGLUOAI && !(c.swiglu_limit > 0.0f))
    throw InvalidArgument("swiglu_limit", "a positive number", std::to_string(c.swiglu_limit));

  expect_present(w.w13_weight, "w13_weight");
  expect_present(w.w2_weight, "w2_weight");
  if (w.w13_weight.ndim != 3) throw InvalidArgument("w13_weight", "3 dimensions [E, 2N, K]", w.w13_weight.shape_str());
  if (w.w2_weight.ndim != 3) throw InvalidArgument("w2_weight", "3 dimensions [E, K, N]", w.w2_weight.shape_str());

  const int64_t pack = is_4bit(c.format) ? 2 : 1;
  LayerShape s;
  s.num_experts = w.w2_weight.shape[0];
  s.hidden = w.w2_weight.shape[1];
  s.inter = w.w2_weight.shape[2] * pack;
  s.w13_rows = w13_rows(c, s.inter);
  const int64_t E = s.num_experts, K = s.hidden, N = s.inter, R = s.w13_rows;
  if (E < 1) throw InvalidArgument("w2_weight", "at least one expert (shape[0] >= 1)", w.w2_weight.shape_str());
  if (K < 1 || N < 1) throw InvalidArgument("w2_weight", "K >= 1 and N >= 1", w.w2_weight.shape_str());
  if (c.interleaved && R % 2 != 0) throw InvalidArgument("w13_weight", "an even number of rows when interleaved", std::to_string(R));

  // Block-size constraints of the formats, before any tensor check so the error names K or N.
  if (c.format == Format::W4A8_INT4 || c.format == Format::MXFP4 || c.format == Format::NVFP4) {
    const int64_t bs = c.format == Format::W4A8_INT4 ? kW4A8GroupSize
                       : c.format == Format::MXFP4   ? kMxfp4BlockSize
                                                     : kNvfp4BlockSize;
    const std::string why = std::string(" of format ") + format_name(c.format) + ": blocks of " + std::to_string(bs);
    expect_multiple(K, bs, ("K (hidden size" + why + ")").c_str());
    expect_multiple(N, bs, ("N (intermediate size" + why + ")").c_str());
  }

  DType wt;
  switch (c.format) {
    case Format::BF16: wt = DType::BF16; break;
    case Format::FP16: wt = DType::F16; break;
    case Format::FP32: wt = DType::F32; break;
    case Format::FP8_TENSOR: case Format::FP8_CHANNEL: case Format::FP8_BLOCK: wt = DType::F8_E4M3; break;
    default: wt = DType::U8; break;
  }
  expect_tensor(w.w2_weight, "w2_weight", wt, {E, K, N / pack});
  if (pack == 2) {
    expect_tensor(w.w13_weight, "w13_weight", wt, {E, R, K / 2});
  } else {
    expect_tensor(w.w13_weight, "w13_weight", wt, {E, R, K});
  }

  const DeviceType dev = w.w13_weight.device;
  auto same_device = [&](const TensorView& t, const char* name) {
    if (t.present() && (t.device != dev || t.device_index != w.w13_weight.device_index))
      throw InvalidArgument(name, "the device of w13_weight", t.device == DeviceType::CPU ? "cpu" : "cuda:" + std::to_string(t.device_index));
  };
  same_device(w.w2_weight, "w2_weight");
  same_device(w.w13_weight_scale, "w13_weight_scale");
  same_device(w.w2_weight_scale, "w2_weight_scale");
  same_device(w.w13_weight_scale_2, "w13_weight_scale_2");
  same_device(w.w2_weight_scale_2, "w2_weight_scale_2");
  same_device(w.w13_input_scale, "w13_input_scale");
  same_device(w.w2_input_scale, "w2_input_scale");
  same_device(w.w13_bias, "w13_bias");
  same_device(w.w2_bias, "w2_bias");

  const bool nvfp4_act = c.format == Format::NVFP4 && c.act_dtype == ActDtype::NVFP4;
  switch (c.format) {
    case Format::BF16: case Format::FP16: case Format::FP32:
      expect_absent(w.w13_weight_scale, "w13_weight_scale", "unquantised format");
      expect_absent(w.w2_weight_scale, "w2_weight_scale", "unquantised format");
      break;
    case Format::FP8_TENSOR:
      expect_tensor(w.w13_weight_scale, "w13_weight_scale", DType::F32, {E});
      expect_tensor(w.w2_weight_scale, "w2_weight_scale", DType::F32, {E});
      break;
    case Format::FP8_CHANNEL:
      expect_tensor(w.w13_weight_scale, "w13_weight_scale", DType::F32, {E, R});
      expect_tensor(w.w2_weight_scale, "w2_weight_scale", DType::F32, {E, K});
      break;
    case Format::FP8_BLOCK:
      expect_tensor(w.w13_weight_scale, "w13_weight_scale", DType::F32, {E, ceil_div(R, 128), ceil_div(K, 128)});
      expect_tensor(w.w2_weight_scale, "w2_weight_scale", DType::F32, {E, ceil_div(K, 128), ceil_div(N, 128)});
      break;
    case Format::W4A8_INT4:
      expect_tensor(w.w13_weight_scale, "w13_weight_scale", DType::BF16, {E, R, K / 128});
      expect_tensor(w.w2_weight_scale, "w2_weight_scale", DType::BF16, {E, K, N / 128});
      break;
    case Format::MXFP4:
    case Format::NVFP4: {
      const int64_t bs = c.format == Format::MXFP4 ? kMxfp4BlockSize : kNvfp4BlockSize;
      const DType st = c.format == Format::MXFP4 ? DType::U8 : DType::F8_E4M3;
      if (c.weight_scale_layout == ScaleLayout::LINEAR) {
        expect_tensor(w.w13_weight_scale, "w13_weight_scale", st, {E, R, K / bs});
        expect_tensor(w.w2_weight_scale, "w2_weight_scale", st, {E, K, N / bs});
      } else {
        expect_tensor(w.w13_weight_scale, "w13_weight_scale", st, {E, round_up(R, 128), round_up(K / bs, 4)});
        expect_tensor(w.w2_weight_scale, "w2_weight_scale", st, {E, round_up(K, 128), round_up(N / bs, 4)});
      }
      break;
    }
  }
  if (c.format == Format::NVFP4) {
    expect_tensor(w.w13_weight_scale_2, "w13_weight_scale_2", DType::F32, {E});
    expect_tensor(w.w2_weight_scale_2, "w2_weight_scale_2", DType::F32, {E});
  } else {
    expect_absent(w.w13_weight_scale_2, "w13_weight_scale_2", "nvfp4 only");
    expect_absent(w.w2_weight_scale_2, "w2_weight_scale_2", "nvfp4 only");
  }
  if (c.format == Format::FP8_TENSOR) {
    if (w.w13_input_scale.present()) expect_tensor(w.w13_input_scale, "w13_input_scale", DType::F32, {1});
    if (w.w2_input_scale.present()) expect_tensor(w.w2_input_scale, "w2_input_scale", DType::F32, {1});
  } else if (nvfp4_act) {
    expect_tensor(w.w13_input_scale, "w13_input_scale", DType::F32, {E});
    expect_tensor(w.w2_input_scale, "w2_input_scale", DType::F32, {E});
  } else {
    expect_absent(w.w13_input_scale, "w13_input_scale", "fp8-tensor and nvfp4 with act_dtype=nvfp4 only");
    expect_absent(w.w2_input_scale, "w2_input_scale", "fp8-tensor and nvfp4 with act_dtype=nvfp4 only");
  }
  if (w.w13_bias.present()) expect_tensor(w.w13_bias, "w13_bias", DType::F32, {E, R});
  if (w.w2_bias.present()) expect_tensor(w.w2_bias, "w2_bias", DType::F32, {E, K});
  return s;
}

namespace {

bool is_float_dtype(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; }

// The dtype of hidden_states: F32/F16/BF16, or F8_E4M3 (pre-quantised) with format fp8-block.
// Returns whether the inputs are pre-quantised.
bool check_hidden_dtype(const LayerConfig& c, const TensorView& x) {
  expect_present(x, "hidden_states");
  if (x.dtype == DType::F8_E4M3) {
    if (c.format != Format::FP8_BLOCK)
      throw InvalidArgument("hidden_states",
                            std::string("dtype F32, F16 or BF16 (pre-quantised F8_E4M3 inputs need format fp8-block; "
                                        "this layer is ") + format_name(c.format) + ")",
                            "F8_E4M3");
    return true;
  }
  if (!is_float_dtype(x.dtype))
    throw InvalidArgument("hidden_states", "dtype F32, F16 or BF16 (or F8_E4M3 with format fp8-block)",
                          dtype_name(x.dtype));
  return false;
}

// hidden_states_scale and output of run() / run_masked(): rows = the leading dims ([M] or [E, T]).
void check_scale_and_output(const TensorView& x, const TensorView& xs, const TensorView& out, bool preq,
                            std::vector<int64_t> rows, int64_t K) {
  if (preq) {
    std::vector<int64_t> sshape = rows;
    sshape.push_back(ceil_div(K, kFp8BlockSize));
    if (!xs.present())
      throw InvalidArgument("hidden_states_scale", "an F32 tensor of 1x128 group scales with F8_E4M3 hidden_states",
                            "none");
    expect_present(xs, "hidden_states_scale");
    expect_dtype(xs, "hidden_states_scale", DType::F32);
    expect_shape(xs, "hidden_states_scale", sshape);
    expect_contiguous(xs, "hidden_states_scale");
  } else {
    expect_absent(xs, "hidden_states_scale", "only with pre-quantised F8_E4M3 hidden_states");
  }
  std::vector<int64_t> oshape = rows;
  oshape.push_back(K);
  expect_present(out, "output");
  if (preq) {
    if (!is_float_dtype(out.dtype))
      throw InvalidArgument("output", "dtype F32, F16 or BF16 (the output and activation dtype of F8_E4M3 inputs)",
                            dtype_name(out.dtype));
  } else {
    expect_dtype(out, "output", x.dtype);
  }
  expect_shape(out, "output", oshape);
  expect_contiguous(out, "output");
}

void check_device(const TensorView& t, const char* name, DeviceType device) {
  if (t.present() && t.device != device)
    throw InvalidArgument(name, device == DeviceType::CPU ? "a CPU tensor (CPU backend)" : "a CUDA tensor (CUDA backend)",
                          t.device == DeviceType::CPU ? "a CPU tensor" : "a CUDA tensor");
}

}  // namespace

Problem validate_run_args(const LayerConfig& c, const LayerShape& s, const RunArgs& a, DeviceType device) {
  const TensorView& x = a.hidden_states;
  const bool preq = check_hidden_dtype(c, x);
  if (x.ndim != 2 || x.shape[1] != s.hidden)
    throw InvalidArgument("hidden_states", "shape [M," + std::to_string(s.hidden) + "]", x.shape_str());
  expect_contiguous(x, "hidden_states");
  const int64_t M = x.shape[0];
  if (preq && a.apply_router_weight_on_input)
    throw InvalidArgument("apply_router_weight_on_input",
                          "false with pre-quantised F8_E4M3 hidden_states (the router weight would have to be "
                          "applied before quantisation; quantise w * x yourself or pass bf16 inputs)",
                          "true");

  expect_present(a.topk_ids, "topk_ids");
  if (a.topk_ids.ndim != 2 || a.topk_ids.shape[0] != M || a.topk_ids.shape[1] < 1)
    throw InvalidArgument("topk_ids", "shape [" + std::to_string(M) + ",topk] with topk >= 1", a.topk_ids.shape_str());
  const int64_t topk = a.topk_ids.shape[1];
  expect_tensor(a.topk_ids, "topk_ids", DType::I32, {M, topk});
  expect_tensor(a.topk_weights, "topk_weights", DType::F32, {M, topk});
  check_scale_and_output(x, a.hidden_states_scale, a.output, preq, {M}, s.hidden);

  int64_t global = s.num_experts;
  if (a.expert_map.present()) {
    expect_present(a.expert_map, "expert_map");
    expect_dtype(a.expert_map, "expert_map", DType::I32);
    if (a.expert_map.ndim != 1 || a.expert_map.shape[0] < 1)
      throw InvalidArgument("expert_map", "shape [E_global] with E_global >= 1", a.expert_map.shape_str());
    expect_contiguous(a.expert_map, "expert_map");
    global = a.expert_map.shape[0];
  }
  auto on_device = [&](const TensorView& t, const char* name) {
    if (t.present() && t.device != device)
      throw InvalidArgument(name, device == DeviceType::CPU ? "a CPU tensor (CPU backend)" : "a CUDA tensor (CUDA backend)",
                            t.device == DeviceType::CPU ? "a CPU tensor" : "a CUDA tensor");
  };
  on_device(a.hidden_states, "hidden_states");
  on_device(a.topk_ids, "topk_ids");
  on_device(a.topk_weights, "topk_weights");
  on_device(a.expert_map, "expert_map");
  on_device(a.output, "output");
  on_device(a.hidden_states_scale, "hidden_states_scale");
  if (M > 0 && a.output.data == a.hidden_states.data)
    throw InvalidArgument("output", "a buffer distinct from hidden_states", "the same pointer");
  if (M > 0 && preq && a.output.data == a.hidden_states_scale.data)
    throw InvalidArgument("output", "a buffer distinct from hidden_states_scale", "the same pointer");

  Problem p;
  p.num_tokens = M;
  p.hidden = s.hidden;
  p.inter = s.inter;
  p.num_experts = s.num_experts;
  p.num_global_experts = global;
  p.topk = topk;
  return p;
}

MaskedProblem validate_masked_args(const LayerConfig& c, const LayerShape& s, const MaskedArgs& a, DeviceType device) {
  const TensorView& x = a.hidden_states;
  const bool preq = check_hidden_dtype(c, x);
  const int64_t E = s.num_experts, K = s.hidden;
  if (x.ndim != 3 || x.shape[0] != E || x.shape[2] != K)
    throw InvalidArgument("hidden_states", "shape [" + std::to_string(E) + ",T," + std::to_string(K) + "] (E local experts, T rows each)",
                          x.shape_str());
  expect_contiguous(x, "hidden_states");
  const int64_t T = x.shape[1];
  expect_tensor(a.expert_num_tokens, "expert_num_tokens", DType::I32, {E});
  check_scale_and_output(x, a.hidden_states_scale, a.output, preq, {E, T}, K);
  check_device(x, "hidden_states", device);
  check_device(a.hidden_states_scale, "hidden_states_scale", device);
  check_device(a.expert_num_tokens, "expert_num_tokens", device);
  check_device(a.output, "output", device);
  if (T > 0 && a.output.data == x.data)
    throw InvalidArgument("output", "a buffer distinct from hidden_states", "the same pointer");
  if (T > 0 && preq && a.output.data == a.hidden_states_scale.data)
    throw InvalidArgument("output", "a buffer distinct from hidden_states_scale", "the same pointer");
  MaskedProblem p;
  p.num_experts = E;
  p.max_tokens_per_expert = T;
  p.hidden = K;
  p.inter = s.inter;
  p.prequantized = preq;
  return p;
}

}  // namespace fusedmoe::detail
