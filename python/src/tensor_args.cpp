#include "tensor_args.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>

#ifdef FUSEDMOE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fmpy {

using fusedmoe::InvalidArgument;

namespace {

// DLPack codes (nanobind 2 and 3 agree on these numbers; the float8 ones are DLPack >= 1.1).
constexpr uint8_t kInt = 0, kUInt = 1, kFloat = 2, kBfloat = 4, kBool = 6;
constexpr uint8_t kFloat8E4M3FN = 10, kFloat8E5M2 = 12, kFloat8E8M0FNU = 14;
// DLPack device types.
constexpr int kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string dl_dtype_str(const nb::dlpack::dtype& d) {
  std::string base;
  switch (d.code) {
    case kInt: base = "int"; break;
    case kUInt: base = "uint"; break;
    case kFloat: base = "float"; break;
    case kBfloat: base = "bfloat"; break;
    case kBool: return "bool";
    case kFloat8E4M3FN: return "float8_e4m3fn";
    case kFloat8E5M2: return "float8_e5m2";
    case kFloat8E8M0FNU: return "float8_e8m0fnu";
    default: base = "dlpack_code" + std::to_string(d.code) + "_"; break;
  }
  std::string s = base + std::to_string(d.bits);
  if (d.lanes != 1) s += "x" + std::to_string(d.lanes);
  return s;
}

// The library dtype an array's own dtype stands for; false where there is none or it is ambiguous.
bool infer_dtype(const nb::dlpack::dtype& d, DType* out) {
  if (d.lanes != 1) return false;
  switch (d.code) {
    case kFloat:
      if (d.bits == 32) { *out = DType::F32; return true; }
      if (d.bits == 16) { *out = DType::F16; return true; }
      return false;
    case kBfloat:
      if (d.bits == 16) { *out = DType::BF16; return true; }
      return false;
    case kInt:
      if (d.bits == 32) { *out = DType::I32; return true; }
      if (d.bits == 64) { *out = DType::I64; return true; }
      return false;
    case kUInt:
      if (d.bits == 8) { *out = DType::U8; return true; }
      return false;
    case kFloat8E4M3FN: *out = DType::F8_E4M3; return d.bits == 8;
    case kFloat8E5M2: *out = DType::F8_E5M2; return d.bits == 8;
    case kFloat8E8M0FNU: *out = DType::U8; return d.bits == 8;  // E8M0 scales are U8 codes here
    default: return false;
  }
}

std::string shape_str(const int64_t* shape, int ndim) {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// Rewrites the view's dtype to `want`, rescaling the last dimension when the element size differs
// (the bytes stay where they are: only contiguous last dimensions can be rescaled).
void reinterpret(TensorView& v, size_t have_bytes, DType want, const char* name, const std::string& have_name) {
  const size_t want_bytes = fusedmoe::dtype_size(want);
  v.dtype = want;
  if (have_bytes == want_bytes) return;
  const std::string what = std::string("an array whose bits can be viewed as ") + fusedmoe::dtype_name(want);
  if (v.ndim < 1 || (v.shape[v.ndim - 1] != 1 && v.strides[v.ndim - 1] != 1))
    throw InvalidArgument(name, what + " (contiguous last dimension)", have_name + " with a strided last dimension");
  for (int i = 0; i < v.ndim - 1; ++i) {
    if ((v.strides[i] * static_cast<int64_t>(have_bytes)) % static_cast<int64_t>(want_bytes) != 0)
      throw InvalidArgument(name, what + " (byte strides a multiple of " + std::to_string(want_bytes) + ")", have_name + " strides");
    v.strides[i] = v.strides[i] * static_cast<int64_t>(have_bytes) / static_cast<int64_t>(want_bytes);
  }
  const int64_t last_bytes = v.shape[v.ndim - 1] * static_cast<int64_t>(have_bytes);
  if (last_bytes % static_cast<int64_t>(want_bytes) != 0)
    throw InvalidArgument(name, what + " (last dimension of a multiple of " + std::to_string(want_bytes) + " bytes)",
                          have_name + " of shape " + v.shape_str());
  v.shape[v.ndim - 1] = last_bytes / static_cast<int64_t>(want_bytes);
  v.strides[v.ndim - 1] = 1;
}

template <typename Array>
void fill_view(const Array& a, TensorView& v, const char* name) {
  const int nd = static_cast<int>(a.ndim());
  if (nd > fusedmoe::kMaxDims) {
    std::vector<int64_t> sh(static_cast<size_t>(nd));
    for (int i = 0; i < nd; ++i) sh[static_cast<size_t>(i)] = static_cast<int64_t>(a.shape(static_cast<size_t>(i)));
    throw InvalidArgument(name, "at most " + std::to_string(fusedmoe::kMaxDims) + " dimensions", shape_str(sh.data(), nd));
  }
  v.data = const_cast<void*>(static_cast<const void*>(a.data()));
  v.ndim = nd;
  int64_t expect = 1;
  for (int i = nd - 1; i >= 0; --i) {
    v.shape[i] = static_cast<int64_t>(a.shape(static_cast<size_t>(i)));
    v.strides[i] = a.stride_ptr() ? a.stride(static_cast<size_t>(i)) : expect;
    expect *= v.shape[i];
  }
  if (nd == 0) {  // a scalar: [1] (ndim 0 means "absent" to the library)
    v.ndim = 1;
    v.shape[0] = 1;
    v.strides[0] = 1;
  }
  switch (a.device_type()) {
    case kDLCPU: case kDLCUDAHost: v.device = DeviceType::CPU; v.device_index = 0; break;
    case kDLCUDA: case kDLCUDAManaged: v.device = DeviceType::CUDA; v.device_index = a.device_id(); break;
    default:
      throw InvalidArgument(name, "a CPU or CUDA array", "DLPack device type " + std::to_string(a.device_type()));
  }
}

int64_t py_int(nb::handle h, const char* name, const char* field) {
  try {
    return nb::cast<int64_t>(h);
  } catch (const nb::cast_error&) {
    throw InvalidArgument(std::string(name) + " (" + field + ")", "an integer", nb::type_name(h.type()).c_str());
  }
}

TensorView raw_descriptor(nb::tuple t, const char* name) {
  TensorView v;
  const uint64_t ptr = nb::cast<uint64_t>(t[0]);
  v.data = reinterpret_cast<void*>(static_cast<uintptr_t>(ptr));
  const std::string dt = nb::cast<std::string>(t[1]);
  if (!parse_dtype(dt, &v.dtype)) throw InvalidArgument(name, "a known dtype name", dt);
  nb::sequence shape = nb::cast<nb::sequence>(t[2]);
  nb::sequence strides = nb::cast<nb::sequence>(t[3]);
  const size_t nd = nb::len(shape);
  if (nb::len(strides) != nd) throw InvalidArgument(name, "as many strides as dimensions", std::to_string(nb::len(strides)));
  if (nd > static_cast<size_t>(fusedmoe::kMaxDims))
    throw InvalidArgument(name, "at most " + std::to_string(fusedmoe::kMaxDims) + " dimensions", std::to_string(nd));
  for (size_t i = 0; i < nd; ++i) {
    v.shape[i] = py_int(shape[i], name, "shape");
    v.strides[i] = py_int(strides[i], name, "strides");
  }
  v.ndim = static_cast<int>(nd);
  if (nd == 0) {  // a scalar: [1] (ndim 0 means "absent" to the library)
    v.ndim = 1;
    v.shape[0] = 1;
    v.strides[0] = 1;
  }
  const int64_t dev = py_int(t[4], name, "device_type");
  if (dev != 0 && dev != 1) throw InvalidArgument(name, "device_type 0 (CPU) or 1 (CUDA)", std::to_string(dev));
  v.device = dev == 1 ? DeviceType::CUDA : DeviceType::CPU;
  v.device_index = static_cast<int>(py_int(t[5], name, "device_index"));
  return v;
}

}  // namespace

bool parse_dtype(const std::string& name, DType* out) {
  if (fusedmoe::dtype_from_name(name, out)) return true;
  const std::string n = lower(name);
  struct Alias { const char* name; DType dtype; };
  static const Alias aliases[] = {
      {"f32", DType::F32},      {"fp32", DType::F32},        {"float32", DType::F32},       {"float", DType::F32},
      {"f16", DType::F16},      {"fp16", DType::F16},        {"float16", DType::F16},       {"half", DType::F16},
      {"bf16", DType::BF16},    {"bfloat16", DType::BF16},   {"f8_e4m3", DType::F8_E4M3},   {"fp8", DType::F8_E4M3},
      {"e4m3", DType::F8_E4M3}, {"float8_e4m3fn", DType::F8_E4M3}, {"f8_e5m2", DType::F8_E5M2}, {"e5m2", DType::F8_E5M2},
      {"float8_e5m2", DType::F8_E5M2}, {"u8", DType::U8},   {"uint8", DType::U8},          {"e8m0", DType::U8},
      {"float8_e8m0fnu", DType::U8}, {"i32", DType::I32},   {"int32", DType::I32},         {"int", DType::I32},
      {"i64", DType::I64},      {"int64", DType::I64},       {"long", DType::I64},
  };
  for (const Alias& a : aliases) {
    if (n == a.name) {
      *out = a.dtype;
      return true;
    }
  }
  return false;
}

std::string device_str(const TensorView& v) {
  return v.device == DeviceType::CPU ? std::string("cpu") : "cuda:" + std::to_string(v.device_index);
}

void require_contiguous(const TensorView& v, const char* name) {
  if (!v.is_contiguous()) {
    std::string s = "strides [";
    for (int i = 0; i < v.ndim; ++i) s += (i ? "," : "") + std::to_string(v.strides[i]);
    throw InvalidArgument(name, "contiguous row-major strides", s + "]");
  }
}

void require_cpu(const TensorView& v, const char* name, const char* what) {
  if (v.device != DeviceType::CPU)
    throw fusedmoe::NotImplemented(std::string(what) + " runs on the CPU only; '" + name + "' is on " + device_str(v) +
                                   " (copy it to the host, or let the layer quantise on the device)");
}

TensorView tensor_arg(nb::handle obj, const char* name, KeepAlive& keep, const TensorArgOptions& opt) {
  if (!obj.is_valid() || obj.is_none()) return TensorView{};

  nb::handle array = obj;
  bool has_override = false;
  DType override_dtype = DType::F32;
  if (nb::isinstance<nb::tuple>(obj)) {
    nb::tuple t = nb::borrow<nb::tuple>(obj);
    if (nb::len(t) == 6) return raw_descriptor(t, name);
    if (nb::len(t) != 2 || !nb::isinstance<nb::str>(t[1]))
      throw InvalidArgument(name, "an array, an (array, dtype name) pair or a raw descriptor", "a tuple of " + std::to_string(nb::len(t)));
    const std::string dt = nb::cast<std::string>(t[1]);
    if (!parse_dtype(dt, &override_dtype))
      throw InvalidArgument(name, "a dtype name such as bf16, fp16, fp32, fp8, uint8, int32", "'" + dt + "'");
    has_override = true;
    array = t[0];
  }

  TensorView v;
  nb::dlpack::dtype dl;
  if (opt.writable) {
    nb::ndarray<> w;
    if (!nb::try_cast<nb::ndarray<>>(array, w, /*convert=*/false)) {
      ROArray r;
      if (nb::try_cast<ROArray>(array, r, /*convert=*/false))
        throw InvalidArgument(name, "a writable array", "a read-only array");
      throw InvalidArgument(name, "an array exporting DLPack (__dlpack__) or the buffer protocol",
                            std::string("an object of type ") + nb::type_name(array.type()).c_str());
    }
    fill_view(w, v, name);
    dl = w.dtype();
    keep.writable.push_back(std::move(w));
  } else {
    ROArray r;
    if (!nb::try_cast<ROArray>(array, r, /*convert=*/false))
      throw InvalidArgument(name, "an array exporting DLPack (__dlpack__) or the buffer protocol",
                            std::string("an object of type ") + nb::type_name(array.type()).c_str());
    fill_view(r, v, name);
    dl = r.dtype();
    keep.arrays.push_back(std::move(r));
  }

  const std::string dl_name = dl_dtype_str(dl);
  const size_t have_bytes = (static_cast<size_t>(dl.bits) * dl.lanes + 7) / 8;
  if (has_override) {
    if (dl.bits % 8 != 0 || dl.code == kBool)
      throw InvalidArgument(name, "an array of whole bytes to reinterpret", dl_name);
    reinterpret(v, have_bytes, override_dtype, name, dl_name);
  } else {
    DType d;
    const bool known = infer_dtype(dl, &d);
    if (opt.has_hint && (dl.code == kUInt || dl.code == kInt) && dl.lanes == 1 &&
        dl.bits == 8 * fusedmoe::dtype_size(opt.hint)) {
      d = opt.hint;  // raw bits of the contract's dtype (NumPy has no bf16 / fp8 dtypes)
    } else if (opt.has_hint && (dl.code == kUInt || dl.code == kInt) && dl.lanes == 1 &&
               fusedmoe::dtype_size(opt.hint) == 1 && dl.bits > 8) {
      // Byte data viewed as wider integers (packed 4-bit weights as int32/int64, FlashInfer's
      // int32 views of block scales): the bytes, in memory order.
      reinterpret(v, have_bytes, opt.hint, name, dl_name);
      return v;
    } else if (!known) {
      throw InvalidArgument(name,
                            "dtype float32, float16, bfloat16, float8_e4m3fn, float8_e5m2, uint8, int32 or int64 "
                            "(raw bits: pass an (array, dtype name) pair)",
                            dl_name);
    }
    v.dtype = d;
  }
  return v;
}

TensorView required_tensor_arg(nb::handle obj, const char* name, KeepAlive& keep, const TensorArgOptions& opt) {
  TensorView v = tensor_arg(obj, name, keep, opt);
  if (!v.present()) throw InvalidArgument(name, "a tensor", "None");
  return v;
}

DeviceGuard::DeviceGuard(const TensorView& view) {
#ifdef FUSEDMOE_WITH_CUDA
  if (view.present() && view.device == DeviceType::CUDA) {
    int current = 0;
    if (cudaGetDevice(&current) == cudaSuccess && current != view.device_index) {
      if (cudaSetDevice(view.device_index) != cudaSuccess)
        throw fusedmoe::Error("cudaSetDevice(" + std::to_string(view.device_index) + ") failed");
      previous_ = current;
    }
  }
#else
  (void)view;
#endif
}

DeviceGuard::~DeviceGuard() {
#ifdef FUSEDMOE_WITH_CUDA
  if (previous_ >= 0) cudaSetDevice(previous_);
#endif
}

}  // namespace fmpy
