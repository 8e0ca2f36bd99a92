// Routing, the quantisers, the 128x4 scale swizzle, array codecs, the layer builder and layer files.
// Routing runs on the tensor's device (CPU, or CUDA on the caller's stream); the quantisers, swizzle
// and codecs are the library's CPU implementations (CUDA arrays are refused with Unsupported).
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "fusedmoe/layer_builder.hpp"
#include "tensor_args.hpp"

namespace fmpy {

using namespace fusedmoe;

namespace {

TensorArgOptions writable() {
  TensorArgOptions o;
  o.writable = true;
  return o;
}

std::string dims(std::initializer_list<int64_t> s) {
  std::string r = "[";
  int i = 0;
  for (int64_t v : s) r += (i++ ? "," : "") + std::to_string(v);
  return r + "]";
}

void expect_shape(const TensorView& v, const char* name, std::initializer_list<int64_t> s) {
  bool ok = v.ndim == static_cast<int>(s.size());
  int i = 0;
  for (int64_t x : s) ok = ok && v.shape[i++] == x;
  if (!ok) throw InvalidArgument(name, "shape " + dims(s), v.shape_str());
}

void expect_dtype(const TensorView& v, const char* name, std::initializer_list<DType> ds) {
  std::string names;
  for (DType d : ds) {
    if (v.dtype == d) return;
    names += (names.empty() ? "" : " or ") + std::string(dtype_name(d));
  }
  throw InvalidArgument(name, "dtype " + names, dtype_name(v.dtype));
}

// A contiguous CPU input of F32 / F16 / BF16 as floats (F32: no copy).
const float* floats(const TensorView& v, const char* name, std::vector<float>& tmp, const char* what) {
  require_cpu(v, name, what);
  require_contiguous(v, name);
  expect_dtype(v, name, {DType::F32, DType::F16, DType::BF16});
  if (v.dtype == DType::F32) return v.ptr<const float>();
  const int64_t n = v.numel();
  tmp.resize(static_cast<size_t>(n));
  const uint16_t* p = v.ptr<const uint16_t>();
  for (int64_t i = 0; i < n; ++i) tmp[i] = v.dtype == DType::F16 ? fp16_bits_to_float(p[i]) : bf16_bits_to_float(p[i]);
  return tmp.data();
}

// A contiguous CPU output.
TensorView out_arg(nb::handle h, const char* name, KeepAlive& keep, std::initializer_list<DType> ds, const char* what) {
  TensorView v = required_tensor_arg(h, name, keep, writable());
  require_cpu(v, name, what);
  require_contiguous(v, name);
  expect_dtype(v, name, ds);
  return v;
}

// Rows x cols of an input whose leading dimensions are flattened into rows.
void rows_cols(const TensorView& v, int64_t* rows, int64_t* cols) {
  *cols = v.shape[v.ndim - 1];
  *rows = v.numel() / std::max<int64_t>(*cols, 1);
}

// Output shape = input shape with the last dimension replaced.
void expect_like(const TensorView& out, const char* name, const TensorView& in, int64_t last) {
  bool ok = out.ndim == in.ndim && out.shape[out.ndim - 1] == last;
  for (int i = 0; ok && i < in.ndim - 1; ++i) ok = out.shape[i] == in.shape[i];
  if (!ok) {
    std::string want = "[";
    for (int i = 0; i < in.ndim - 1; ++i) want += std::to_string(in.shape[i]) + ",";
    throw InvalidArgument(name, "shape " + want + std::to_string(last) + "]", out.shape_str());
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

Mxfp4ScaleRounding parse_rounding(const std::string& s) {
  if (s == "nvidia") return Mxfp4ScaleRounding::NVIDIA;
  if (s == "ocp") return Mxfp4ScaleRounding::OCP;
  throw InvalidArgument("rounding", "nvidia or ocp", "'" + s + "'");
}

// ---- host tensors <-> NumPy ----
nb::dlpack::dtype numpy_dtype(DType d) {
  switch (d) {
    case DType::F32: return nb::dtype<float>();
    case DType::F16: {
      nb::dlpack::dtype t;
      t.code = static_cast<uint8_t>(nb::dlpack::dtype_code::Float);
      t.bits = 16;
      t.lanes = 1;
      return t;
    }
    case DType::BF16: return nb::dtype<uint16_t>();  // raw bits (NumPy has no bfloat16)
    case DType::F8_E4M3: case DType::F8_E5M2: case DType::U8: return nb::dtype<uint8_t>();
    case DType::I32: return nb::dtype<int32_t>();
    case DType::I64: return nb::dtype<int64_t>();
  }
  return nb::dtype<uint8_t>();
}

nb::object to_numpy(HostTensor&& t) {
  auto* bytes = new std::vector<uint8_t>(std::move(t.bytes));
  nb::capsule owner(bytes, [](void* p) noexcept { delete static_cast<std::vector<uint8_t>*>(p); });
  size_t shape[kMaxDims];
  for (size_t i = 0; i < t.shape.size(); ++i) shape[i] = static_cast<size_t>(t.shape[i]);
  nb::ndarray<nb::numpy> a(bytes->data(), t.shape.size(), shape, owner, nullptr, numpy_dtype(t.dtype));
  return a.cast();
}

nb::object floats_to_numpy(std::vector<float>&& v, std::initializer_list<int64_t> shape) {
  HostTensor t;
  t.dtype = DType::F32;
  t.shape.assign(shape.begin(), shape.end());
  t.bytes.resize(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return to_numpy(std::move(t));
}

// {name: (array, dtype name)}
nb::dict tensors_to_dict(std::map<std::string, HostTensor>&& tensors) {
  nb::dict d;
  for (auto& [name, t] : tensors) {
    const std::string dt = dtype_name(t.dtype);
    d[name.c_str()] = nb::make_tuple(to_numpy(std::move(t)), dt);
  }
  return d;
}

// A copy of a CPU tensor argument as a HostTensor (any strides).
HostTensor host_copy(const TensorView& v, const char* name) {
  require_cpu(v, name, "this function");
  HostTensor t;
  t.dtype = v.dtype;
  t.shape.assign(v.shape.begin(), v.shape.begin() + v.ndim);
  const size_t es = dtype_size(v.dtype);
  t.bytes.resize(static_cast<size_t>(v.numel()) * es);
  if (v.is_contiguous()) {
    if (!t.bytes.empty()) std::memcpy(t.bytes.data(), v.data, t.bytes.size());
    return t;
  }
  int64_t idx[kMaxDims] = {0, 0, 0, 0};
  const uint8_t* src = static_cast<const uint8_t*>(v.data);
  for (int64_t i = 0; i < v.numel(); ++i) {
    int64_t off = 0;
    for (int d = 0; d < v.ndim; ++d) off += idx[d] * v.strides[d];
    std::memcpy(t.bytes.data() + static_cast<size_t>(i) * es, src + off * static_cast<int64_t>(es), es);
    for (int d = v.ndim - 1; d >= 0; --d) {
      if (++idx[d] < v.shape[d]) break;
      idx[d] = 0;
    }
  }
  return t;
}

LayerFile layer_file_from(nb::dict config, nb::dict weights) {
  LayerFile f;
  f.config = config_from_dict(config);
  KeepAlive keep;
  for (auto [k, v] : weights) {
    const std::string name = nb::cast<std::string>(k);
    TensorArgOptions opt;
    opt.has_hint = true;  // raw integer bits of the contract's dtype are taken as it
    opt.hint = contract_dtype(f.config, name);
    const TensorView view = tensor_arg(v, name.c_str(), keep, opt);
    if (view.present()) f.tensors[name] = host_copy(view, name.c_str());
  }
  auto it = f.tensors.find("w2_weight");
  if (it == f.tensors.end()) throw InvalidArgument("w2_weight", "a tensor", "none");
  if (it->second.shape.size() != 3) throw InvalidArgument("w2_weight", "3 dimensions [E, K, N]", std::to_string(it->second.shape.size()) + " dimensions");
  const bool four_bit = f.config.format == Format::W4A8_INT4 || f.config.format == Format::MXFP4 || f.config.format == Format::NVFP4;
  f.num_experts = it->second.shape[0];
  f.hidden = it->second.shape[1];
  f.inter = it->second.shape[2] * (four_bit ? 2 : 1);
  // Validate every tensor the way the Layer does (names the tensor on error).
  LayerOptions lo;
  lo.backend = Backend::CPU;
  lo.cpu_threads = 1;
  Layer check(f.config, f.weights(), lo);
  return f;
}

}  // namespace

void bind_ops(nb::module_& m) {
  // ---- routing ----
  m.def("route", [](nb::handle logits, nb::handle topk_ids, nb::handle topk_weights, const std::string& score,
                    bool renormalize, int64_t num_groups, int64_t topk_groups, nb::handle correction_bias,
                    float routed_scaling_factor, nb::handle stream) {
    KeepAlive keep;
    const TensorView lg = required_tensor_arg(logits, "logits", keep);
    const TensorView ids = required_tensor_arg(topk_ids, "topk_ids", keep, writable());
    const TensorView w = required_tensor_arg(topk_weights, "topk_weights", keep, writable());
    const TensorView bias = tensor_arg(correction_bias, "correction_bias", keep);
    expect_dtype(lg, "logits", {DType::F32});
    if (lg.ndim != 2) throw InvalidArgument("logits", "shape [num_tokens, num_experts]", lg.shape_str());
    const int64_t M = lg.shape[0], E = lg.shape[1];
    if (ids.ndim != 2 || ids.shape[0] != M)
      throw InvalidArgument("topk_ids", "shape [" + std::to_string(M) + ",topk]", ids.shape_str());
    const int64_t topk = ids.shape[1];
    expect_dtype(ids, "topk_ids", {DType::I32});
    expect_dtype(w, "topk_weights", {DType::F32});
    expect_shape(w, "topk_weights", {M, topk});
    for (const auto& [v, name] : {std::make_pair(lg, "logits"), std::make_pair(ids, "topk_ids"), std::make_pair(w, "topk_weights")}) {
      require_contiguous(v, name);
      if (v.device != lg.device || v.device_index != lg.device_index)
        throw InvalidArgument(name, "the device of logits (" + device_str(lg) + ")", device_str(v));
    }
    if (bias.present()) {
      expect_dtype(bias, "correction_bias", {DType::F32});
      expect_shape(bias, "correction_bias", {E});
      require_contiguous(bias, "correction_bias");
      if (bias.device != lg.device || bias.device_index != lg.device_index)
        throw InvalidArgument("correction_bias", "the device of logits (" + device_str(lg) + ")", device_str(bias));
    }
    RoutingConfig c;
    c.num_experts = E;
    c.topk = topk;
    if (score == "softmax") c.score = ScoreFunction::SOFTMAX;
    else if (score == "sigmoid") c.score = ScoreFunction::SIGMOID;
    else throw InvalidArgument("score", "softmax or sigmoid", "'" + score + "'");
    c.renormalize = renormalize;
    c.num_groups = num_groups;
    c.topk_groups = topk_groups;
    c.correction_bias = bias.present() ? bias.ptr<const float>() : nullptr;
    c.routed_scaling_factor = routed_scaling_factor;
    void* s = nullptr;
    if (stream.is_valid() && !stream.is_none()) s = reinterpret_cast<void*>(static_cast<uintptr_t>(nb::cast<uint64_t>(stream)));
    if (lg.device == DeviceType::CPU) {
      nb::gil_scoped_release release;
      route_cpu(c, lg.ptr<const float>(), M, ids.ptr<int32_t>(), w.ptr<float>());
    } else {
      DeviceGuard guard(lg);
      route_cuda(c, lg.ptr<const float>(), M, ids.ptr<int32_t>(), w.ptr<float>(), s);
    }
  }, nb::arg("logits"), nb::arg("topk_ids"), nb::arg("topk_weights"), nb::arg("score") = "softmax",
     nb::arg("renormalize") = true, nb::arg("num_groups") = 0, nb::arg("topk_groups") = 0,
     nb::arg("correction_bias").none() = nb::none(), nb::arg("routed_scaling_factor") = 1.0f,
     nb::arg("stream").none() = nb::none());

  // ---- activation quantisers (CPU) ----
  m.def("quantize_fp8_per_tensor", [](nb::handle x, nb::handle q, nb::handle scale) {
    KeepAlive keep;
    std::vector<float> tmp;
    const TensorView xv = required_tensor_arg(x, "x", keep);
    const float* xf = floats(xv, "x", tmp, "quantize_fp8_per_tensor");
    const TensorView qv = out_arg(q, "q", keep, {DType::U8, DType::F8_E4M3}, "quantize_fp8_per_tensor");
    if (qv.numel() != xv.numel()) throw InvalidArgument("q", "shape " + xv.shape_str(), qv.shape_str());
    float s = 0;
    if (scale.is_none()) {
      nb::gil_scoped_release release;
      s = fp8_tensor_scale(xf, xv.numel());
    } else {
      s = nb::cast<float>(scale);
    }
    if (!(s > 0) || !std::isfinite(s)) throw InvalidArgument("scale", "a positive finite scale", std::to_string(s));
    nb::gil_scoped_release release;
    quantize_fp8_with_scale(xf, xv.numel(), s, qv.ptr<uint8_t>());
    return s;
  }, nb::arg("x"), nb::arg("q"), nb::arg("scale").none() = nb::none());

  m.def("quantize_fp8_per_row", [](nb::handle x, nb::handle q, nb::handle scales) {
    KeepAlive keep;
    std::vector<float> tmp;
    const TensorView xv = required_tensor_arg(x, "x", keep);
    const float* xf = floats(xv, "x", tmp, "quantize_fp8_per_row");
    int64_t rows, cols;
    rows_cols(xv, &rows, &cols);
    const TensorView qv = out_arg(q, "q", keep, {DType::U8, DType::F8_E4M3}, "quantize_fp8_per_row");
    const TensorView sv = out_arg(scales, "scales", keep, {DType::F32}, "quantize_fp8_per_row");
    expect_like(qv, "q", xv, cols);
    if (sv.numel() != rows) throw InvalidArgument("scales", std::to_string(rows) + " values (one per row)", sv.shape_str());
    nb::gil_scoped_release release;
    quantize_fp8_per_row(xf, rows, cols, qv.ptr<uint8_t>(), sv.ptr<float>());
  }, nb::arg("x"), nb::arg("q"), nb::arg("scales"));

  m.def("quantize_fp8_per_token_group", [](nb::handle x, nb::handle q, nb::handle scales, int64_t group, bool ue8m0) {
    KeepAlive keep;
    std::vector<float> tmp;
    const TensorView xv = required_tensor_arg(x, "x", keep);
    const float* xf = floats(xv, "x", tmp, "quantize_fp8_per_token_group");
    if (group < 1) throw InvalidArgument("group_size", ">= 1", std::to_string(group));
    int64_t rows, cols;
    rows_cols(xv, &rows, &cols);
    const TensorView qv = out_arg(q, "q", keep, {DType::U8, DType::F8_E4M3}, "quantize_fp8_per_token_group");
    const TensorView sv = out_arg(scales, "scales", keep, {DType::F32}, "quantize_fp8_per_token_group");
    expect_like(qv, "q", xv, cols);
    expect_like(sv, "scales", xv, ceil_div(cols, group));
    nb::gil_scoped_release release;
    quantize_fp8_per_token_group(xf, rows, cols, group, ue8m0, qv.ptr<uint8_t>(), sv.ptr<float>());
  }, nb::arg("x"), nb::arg("q"), nb::arg("scales"), nb::arg("group_size") = 128, nb::arg("ue8m0") = false);

  m.def("nvfp4_global_scale", [](nb::handle x) {
    KeepAlive keep;
    std::vector<float> tmp;
    const TensorView xv = required_tensor_arg(x, "x", keep);
    const float* xf = floats(xv, "x", tmp, "nvfp4_global_scale");
    return nvfp4_global_scale(xf, xv.numel());
  }, nb::arg("x"));

  m.def("quantize_nvfp4", [](nb::handle x, float global_scale, nb::handle q, nb::handle sf) {
    KeepAlive keep;
    std::vector<float> tmp;
    const TensorView xv = required_tensor_arg(x, "x", keep);
    const float* xf = floats(xv, "x", tmp, "quantize_nvfp4");
    int64_t rows, cols;
    rows_cols(xv, &rows, &cols);
    if (cols % kNvfp4BlockSize != 0) throw InvalidArgument("x", "a last dimension that is a multiple of 16", xv.shape_str());
    if (!(global_scale > 0) || !std::isfinite(global_scale))
      throw InvalidArgument("global_scale", "a positive finite scale", std::to_string(global_scale));
    const TensorView qv = out_arg(q, "q", keep, {DType::U8}, "quantize_nvfp4");
    const TensorView sv = out_arg(sf, "scales", keep, {DType::U8, DType::F8_E4M3}, "quantize_nvfp4");
    expect_like(qv, "q", xv, cols / 2);
    expect_like(sv, "scales", xv, cols / kNvfp4BlockSize);
    nb::gil_scoped_release release;
    quantize_nvfp4(xf, rows, cols, global_scale, qv.ptr<uint8_t>(), sv.ptr<uint8_t>());
  }, nb::arg("x"), nb::arg("global_scale"), nb::arg("q"), nb::arg("scales"));

  // ---- weight quantisers (CPU) ----
  m.def("quantize_fp8_block_weight", [](nb::handle w, nb::handle q, nb::handle scales) {
    KeepAlive keep;
    std::vector<float> tmp;
    const TensorView wv = required_tensor_arg(w, "w", keep);
    const float* wf = floats(wv, "w", tmp, "quantize_fp8_block_weight");
    if (wv.ndim < 2) throw InvalidArgument("w", "a [..., rows, cols] matrix", wv.shape_str());
    const int64_t rows = wv.shape[wv.ndim - 2], cols = wv.shape[wv.ndim - 1];
    const int64_t batch = wv.numel() / std::max<int64_t>(rows * cols, 1);
    const TensorView qv = out_arg(q, "q", keep, {DType::U8, DType::F8_E4M3}, "quantize_fp8_block_weight");
    const TensorView sv = out_arg(scales, "scales", keep, {DType::F32}, "quantize_fp8_block_weight");
    expect_like(qv, "q", wv, cols);
    const int64_t sr = ceil_div(rows, 128), sc = ceil_div(cols, 128);
    if (sv.numel() != batch * sr * sc || sv.ndim != wv.ndim || sv.shape[sv.ndim - 1] != sc || sv.shape[sv.ndim - 2] != sr)
      throw InvalidArgument("scales", "shape [..., " + std::to_string(sr) + "," + std::to_string(sc) + "] (128x128 blocks)", sv.shape_str());
    nb::gil_scoped_release release;
    for (int64_t b = 0; b < batch; ++b)
      quantize_fp8_block_weight(wf + b * rows * cols, rows, cols, qv.ptr<uint8_t>() + b * rows * cols,
                                sv.ptr<float>() + b * sr * sc);
  }, nb::arg("w"), nb::arg("q"), nb::arg("scales"));

  m.def("quantize_mxfp4", [](nb::handle w, nb::handle q, nb::handle scales, const std::string& rounding) {
    KeepAlive keep;
    std::vector<float> tmp;
    const Mxfp4ScaleRounding r = parse_rounding(rounding);
    const TensorView wv = required_tensor_arg(w, "w", keep);
    const float* wf = floats(wv, "w", tmp, "quantize_mxfp4");
    int64_t rows, cols;
    rows_cols(wv, &rows, &cols);
    if (cols % kMxfp4BlockSize != 0) throw InvalidArgument("w", "a last dimension that is a multiple of 32", wv.shape_str());
    const TensorView qv = out_arg(q, "q", keep, {DType::U8}, "quantize_mxfp4");
    const TensorView sv = out_arg(scales, "scales", keep, {DType::U8}, "quantize_mxfp4");
    expect_like(qv, "q", wv, cols / 2);
    expect_like(sv, "scales", wv, cols / kMxfp4BlockSize);
    nb::gil_scoped_release release;
    quantize_mxfp4(wf, rows, cols, r, qv.ptr<uint8_t>(), sv.ptr<uint8_t>());
  }, nb::arg("w"), nb::arg("q"), nb::arg("scales"), nb::arg("rounding") = "nvidia");

  m.def("quantize_int4_group", [](nb::handle w, nb::handle q, nb::handle scales, int64_t group, const std::string& encoding) {
    KeepAlive keep;
    std::vector<float> tmp;
    const TensorView wv = required_tensor_arg(w, "w", keep);
    const float* wf = floats(wv, "w", tmp, "quantize_int4_group");
    int64_t rows, cols;
    rows_cols(wv, &rows, &cols);
    if (group < 2 || group % 2 != 0 || cols % group != 0)
      throw InvalidArgument("group_size", "an even divisor of the last dimension (" + std::to_string(cols) + ")", std::to_string(group));
    if (encoding != "signed" && encoding != "uint4b8") throw InvalidArgument("encoding", "signed or uint4b8", "'" + encoding + "'");
    const TensorView qv = out_arg(q, "q", keep, {DType::U8}, "quantize_int4_group");
    TensorArgOptions so = writable();
    so.has_hint = true;
    so.hint = DType::BF16;
    TensorView sv = required_tensor_arg(scales, "scales", keep, so);
    require_cpu(sv, "scales", "quantize_int4_group");
    require_contiguous(sv, "scales");
    expect_dtype(sv, "scales", {DType::BF16});
    expect_like(qv, "q", wv, cols / 2);
    expect_like(sv, "scales", wv, cols / group);
    nb::gil_scoped_release release;
    std::vector<int8_t> values(static_cast<size_t>(rows * cols));
    quantize_int4_group(wf, rows, cols, group, values.data(), sv.ptr<uint16_t>());
    if (encoding == "signed") pack_int4(values.data(), values.size(), qv.ptr<uint8_t>());
    else pack_uint4b8(values.data(), values.size(), qv.ptr<uint8_t>());
  }, nb::arg("w"), nb::arg("q"), nb::arg("scales"), nb::arg("group_size") = 128, nb::arg("encoding") = "signed");

  m.def("w4a8_split_scales", [](nb::handle s, nb::handle c, nb::handle g) {
    KeepAlive keep;
    TensorArgOptions so;
    so.has_hint = true;
    so.hint = DType::BF16;
    const TensorView sv = required_tensor_arg(s, "scales", keep, so);
    require_cpu(sv, "scales", "w4a8_split_scales");
    require_contiguous(sv, "scales");
    expect_dtype(sv, "scales", {DType::BF16});
    int64_t rows, groups;
    rows_cols(sv, &rows, &groups);
    const TensorView cv = out_arg(c, "channel_scales", keep, {DType::F32}, "w4a8_split_scales");
    const TensorView gv = out_arg(g, "group_scales", keep, {DType::U8, DType::F8_E4M3}, "w4a8_split_scales");
    if (cv.numel() != rows) throw InvalidArgument("channel_scales", std::to_string(rows) + " values (one per row)", cv.shape_str());
    expect_like(gv, "group_scales", sv, groups);
    nb::gil_scoped_release release;
    w4a8_split_scales(sv.ptr<const uint16_t>(), rows, groups, cv.ptr<float>(), gv.ptr<uint8_t>());
  }, nb::arg("scales"), nb::arg("channel_scales"), nb::arg("group_scales"));

  // ---- the 128x4 swizzled scale layout (CPU) ----
  m.def("swizzle_scales_128x4", [](nb::handle flat, nb::handle out, bool inverse) {
    KeepAlive keep;
    const TensorView in = required_tensor_arg(flat, inverse ? "swizzled" : "scales", keep);
    const TensorView ov = required_tensor_arg(out, "out", keep, writable());
    const char* what = "swizzle_scales_128x4";
    require_cpu(in, inverse ? "swizzled" : "scales", what);
    require_cpu(ov, "out", what);
    require_contiguous(in, inverse ? "swizzled" : "scales");
    require_contiguous(ov, "out");
    if (dtype_size(in.dtype) != 1 || dtype_size(ov.dtype) != 1)
      throw InvalidArgument("scales", "1-byte scale codes (uint8, float8_e4m3fn, float8_e8m0fnu)",
                            std::string(dtype_name(in.dtype)) + " -> " + dtype_name(ov.dtype));
    // The logical (flat) shape is [..., rows, cols]; the swizzled one [..., round_up(rows,128), round_up(cols,4)].
    const TensorView& logical = inverse ? ov : in;
    const TensorView& sw = inverse ? in : ov;
    if (logical.ndim < 2) throw InvalidArgument(inverse ? "out" : "scales", "a [..., rows, cols] matrix", logical.shape_str());
    const int64_t rows = logical.shape[logical.ndim - 2], cols = logical.shape[logical.ndim - 1];
    const int64_t batch = logical.numel() / std::max<int64_t>(rows * cols, 1);
    const int64_t pr = round_up(rows, 128), pc = round_up(cols, 4);
    bool ok = sw.ndim == logical.ndim && sw.shape[sw.ndim - 2] == pr && sw.shape[sw.ndim - 1] == pc;
    for (int i = 0; ok && i < logical.ndim - 2; ++i) ok = sw.shape[i] == logical.shape[i];
    if (!ok)
      throw InvalidArgument(inverse ? "swizzled" : "out", "shape [..., " + std::to_string(pr) + "," + std::to_string(pc) + "]", sw.shape_str());
    nb::gil_scoped_release release;
    for (int64_t b = 0; b < batch; ++b) {
      const uint8_t* src = in.ptr<const uint8_t>();
      uint8_t* dst = ov.ptr<uint8_t>();
      if (inverse) unswizzle_scales_128x4(src + b * pr * pc, rows, cols, dst + b * rows * cols);
      else swizzle_scales_128x4(src + b * rows * cols, rows, cols, dst + b * pr * pc);
    }
  }, nb::arg("scales"), nb::arg("out"), nb::arg("inverse") = false);

  // ---- array codecs (CPU): float32 <-> raw bits ----
  m.def("encode", [](nb::handle x, nb::handle out, const std::string& fmt) {
    KeepAlive keep;
    std::vector<float> tmp;
    const TensorView xv = required_tensor_arg(x, "x", keep);
    const float* xf = floats(xv, "x", tmp, "encode");
    const int64_t n = xv.numel();
    TensorArgOptions oo = writable();
    oo.has_hint = true;  // raw bits: uint16 for bf16 / fp16, uint8 otherwise
    oo.hint = fmt == "bf16" ? DType::BF16 : fmt == "fp16" ? DType::F16 : DType::U8;
    TensorView ov = required_tensor_arg(out, "out", keep, oo);
    require_cpu(ov, "out", "encode");
    require_contiguous(ov, "out");
    const size_t out_bytes = ov.nbytes();
    auto need = [&](size_t bytes) {
      if (out_bytes != bytes) throw InvalidArgument("out", std::to_string(bytes) + " bytes", std::to_string(out_bytes) + " bytes");
    };
    nb::gil_scoped_release release;
    if (fmt == "bf16" || fmt == "fp16") {
      need(static_cast<size_t>(n) * 2);
      uint16_t* o = static_cast<uint16_t*>(ov.data);
      for (int64_t i = 0; i < n; ++i) o[i] = fmt == "bf16" ? float_to_bf16_bits(xf[i]) : float_to_fp16_bits(xf[i]);
    } else if (fmt == "e4m3" || fmt == "e5m2") {
      need(static_cast<size_t>(n));
      uint8_t* o = static_cast<uint8_t*>(ov.data);
      for (int64_t i = 0; i < n; ++i) o[i] = fmt == "e4m3" ? float_to_e4m3(xf[i]) : float_to_e5m2(xf[i]);
    } else if (fmt == "e2m1") {
      if (n % 2 != 0) throw InvalidArgument("x", "an even number of values (two per byte)", std::to_string(n));
      need(static_cast<size_t>(n / 2));
      pack_e2m1(xf, static_cast<size_t>(n), static_cast<uint8_t*>(ov.data));
    } else {
      throw InvalidArgument("format", "bf16, fp16, e4m3, e5m2 or e2m1", "'" + fmt + "'");
    }
  }, nb::arg("x"), nb::arg("out"), nb::arg("format"));

  m.def("decode", [](nb::handle bits, nb::handle out, const std::string& fmt) {
    KeepAlive keep;
    TensorArgOptions bo;
    bo.has_hint = true;  // raw bits: uint16 for bf16 / fp16, uint8 otherwise
    bo.hint = fmt == "bf16" ? DType::BF16 : fmt == "fp16" ? DType::F16 : DType::U8;
    const TensorView bv = required_tensor_arg(bits, "bits", keep, bo);
    require_cpu(bv, "bits", "decode");
    require_contiguous(bv, "bits");
    const TensorView ov = out_arg(out, "out", keep, {DType::F32}, "decode");
    const int64_t n = ov.numel();
    const size_t in_bytes = bv.nbytes();
    auto need = [&](size_t bytes) {
      if (in_bytes != bytes) throw InvalidArgument("bits", std::to_string(bytes) + " bytes", std::to_string(in_bytes) + " bytes");
    };
    float* o = ov.ptr<float>();
    nb::gil_scoped_release release;
    if (fmt == "bf16" || fmt == "fp16") {
      need(static_cast<size_t>(n) * 2);
      const uint16_t* b = static_cast<const uint16_t*>(bv.data);
      for (int64_t i = 0; i < n; ++i) o[i] = fmt == "bf16" ? bf16_bits_to_float(b[i]) : fp16_bits_to_float(b[i]);
    } else if (fmt == "e4m3" || fmt == "e5m2" || fmt == "e8m0") {
      need(static_cast<size_t>(n));
      const uint8_t* b = static_cast<const uint8_t*>(bv.data);
      for (int64_t i = 0; i < n; ++i)
        o[i] = fmt == "e4m3" ? e4m3_to_float(b[i]) : fmt == "e5m2" ? e5m2_to_float(b[i]) : e8m0_to_float(b[i]);
    } else if (fmt == "e2m1") {
      if (n % 2 != 0) throw InvalidArgument("out", "an even number of values (two per byte)", std::to_string(n));
      need(static_cast<size_t>(n / 2));
      unpack_e2m1(static_cast<const uint8_t*>(bv.data), static_cast<size_t>(n), o);
    } else {
      throw InvalidArgument("format", "bf16, fp16, e4m3, e5m2, e8m0 or e2m1", "'" + fmt + "'");
    }
  }, nb::arg("bits"), nb::arg("out"), nb::arg("format"));

  // ---- layer builder and layer files (CPU, NumPy results) ----
  m.def("random_float_layer", [](nb::dict config, int64_t E, int64_t K, int64_t N, uint64_t seed, bool with_bias,
                                 float weight_std) {
    LayerConfig c = config_from_dict(config);
    FloatLayer l;
    {
      nb::gil_scoped_release release;
      l = random_float_layer(c, E, K, N, seed, with_bias, weight_std);
    }
    const int64_t R = l.w13_rows();
    nb::dict d;
    d["w13"] = floats_to_numpy(std::move(l.w13), {E, R, K});
    d["w2"] = floats_to_numpy(std::move(l.w2), {E, K, N});
    if (with_bias) {
      d["w13_bias"] = floats_to_numpy(std::move(l.w13_bias), {E, R});
      d["w2_bias"] = floats_to_numpy(std::move(l.w2_bias), {E, K});
    }
    return d;
  }, nb::arg("config"), nb::arg("num_experts"), nb::arg("hidden"), nb::arg("inter"), nb::arg("seed") = 0,
     nb::arg("with_bias") = false, nb::arg("weight_std") = 0.05f);

  m.def("quantize_layer", [](nb::dict config, nb::handle w13, nb::handle w2, nb::handle w13_bias, nb::handle w2_bias,
                             const std::string& format, const std::string& act_dtype, const std::string& rounding,
                             float fp8_w13_input_scale, float fp8_w2_input_scale, float nvfp4_w13_act_amax,
                             float nvfp4_w2_act_amax, int threads) {
    FloatLayer l;
    l.config = config_from_dict(config);
    KeepAlive keep;
    std::vector<float> tmp;
    const TensorView a = required_tensor_arg(w13, "w13", keep);
    const TensorView b = required_tensor_arg(w2, "w2", keep);
    if (a.ndim != 3) throw InvalidArgument("w13", "shape [E, 2N or N, K]", a.shape_str());
    if (b.ndim != 3) throw InvalidArgument("w2", "shape [E, K, N]", b.shape_str());
    l.num_experts = b.shape[0];
    l.hidden = b.shape[1];
    l.inter = b.shape[2];
    expect_shape(a, "w13", {l.num_experts, l.w13_rows(), l.hidden});
    const float* af = floats(a, "w13", tmp, "quantize_layer");
    l.w13.assign(af, af + a.numel());
    const float* bf = floats(b, "w2", tmp, "quantize_layer");
    l.w2.assign(bf, bf + b.numel());
    const TensorView ab = tensor_arg(w13_bias, "w13_bias", keep);
    if (ab.present()) {
      expect_shape(ab, "w13_bias", {l.num_experts, l.w13_rows()});
      const float* p = floats(ab, "w13_bias", tmp, "quantize_layer");
      l.w13_bias.assign(p, p + ab.numel());
    }
    const TensorView bb = tensor_arg(w2_bias, "w2_bias", keep);
    if (bb.present()) {
      expect_shape(bb, "w2_bias", {l.num_experts, l.hidden});
      const float* p = floats(bb, "w2_bias", tmp, "quantize_layer");
      l.w2_bias.assign(p, p + bb.numel());
    }
    QuantizeOptions o;
    if (!format_from_name(format, &o.format))
      throw InvalidArgument("format", "one of bf16, fp16, fp32, fp8-tensor, fp8-channel, fp8-block, w4a8-int4, mxfp4, nvfp4", "'" + format + "'");
    if (!act_dtype_from_name(act_dtype, &o.act_dtype)) throw InvalidArgument("act_dtype", "bf16, fp8 or nvfp4", "'" + act_dtype + "'");
    {
      // The block sizes of the 4-bit formats (the encoders assume them).
      const int64_t bs = o.format == Format::W4A8_INT4 ? kW4A8GroupSize : o.format == Format::MXFP4 ? kMxfp4BlockSize
                         : o.format == Format::NVFP4   ? kNvfp4BlockSize : 1;
      const std::string why = std::string(" of format ") + format_name(o.format) + ": blocks of " + std::to_string(bs);
      if (l.hidden % bs != 0) throw InvalidArgument("K (hidden size" + why + ")", "a multiple of " + std::to_string(bs), std::to_string(l.hidden));
      if (l.inter % bs != 0) throw InvalidArgument("N (intermediate size" + why + ")", "a multiple of " + std::to_string(bs), std::to_string(l.inter));
    }
    o.mxfp4_rounding = parse_rounding(rounding);
    o.fp8_w13_input_scale = fp8_w13_input_scale;
    o.fp8_w2_input_scale = fp8_w2_input_scale;
    o.nvfp4_w13_act_amax = nvfp4_w13_act_amax;
    o.nvfp4_w2_act_amax = nvfp4_w2_act_amax;
    o.threads = threads;
    LayerFile f;
    {
      nb::gil_scoped_release release;
      f = quantize_layer(l, o);
    }
    nb::dict cfg = config_to_dict(f.config);
    return nb::make_tuple(cfg, tensors_to_dict(std::move(f.tensors)));
  }, nb::arg("config"), nb::arg("w13"), nb::arg("w2"), nb::arg("w13_bias").none() = nb::none(),
     nb::arg("w2_bias").none() = nb::none(), nb::arg("format"), nb::arg("act_dtype") = "bf16",
     nb::arg("mxfp4_rounding") = "nvidia", nb::arg("fp8_w13_input_scale") = 0.0f, nb::arg("fp8_w2_input_scale") = 0.0f,
     nb::arg("nvfp4_w13_act_amax") = 0.0f, nb::arg("nvfp4_w2_act_amax") = 0.0f, nb::arg("threads") = 0);

  m.def("dequantize_layer", [](nb::dict config, nb::dict weights) {
    const LayerFile f = layer_file_from(config, weights);
    FloatLayer l;
    {
      nb::gil_scoped_release release;
      l = dequantize_layer(f);
    }
    const int64_t E = l.num_experts, K = l.hidden, N = l.inter, R = l.w13_rows();
    nb::dict d;
    d["w13"] = floats_to_numpy(std::move(l.w13), {E, R, K});
    d["w2"] = floats_to_numpy(std::move(l.w2), {E, K, N});
    if (!l.w13_bias.empty()) d["w13_bias"] = floats_to_numpy(std::move(l.w13_bias), {E, R});
    if (!l.w2_bias.empty()) d["w2_bias"] = floats_to_numpy(std::move(l.w2_bias), {E, K});
    return d;
  }, nb::arg("config"), nb::arg("weights"));

  m.def("read_layer_file", [](const std::string& path) {
    LayerFile f;
    {
      nb::gil_scoped_release release;
      f = read_layer_file(path);
    }
    nb::dict cfg = config_to_dict(f.config);
    return nb::make_tuple(cfg, tensors_to_dict(std::move(f.tensors)));
  }, nb::arg("path"));

  m.def("write_layer_file", [](const std::string& path, nb::dict config, nb::dict weights) {
    const LayerFile f = layer_file_from(config, weights);
    nb::gil_scoped_release release;
    write_layer_file(path, f);
  }, nb::arg("path"), nb::arg("config"), nb::arg("weights"));
}

}  // namespace fmpy
