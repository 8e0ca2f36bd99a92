#pragma once
// Shared helpers of the CUDA backend tests: RAII device buffers, random layers copied to the
// device, running a layer on the GPU (output poisoned with NaN bytes first) and on the float64
// CPU oracle, and the comparison. No GPU call happens before a test body runs (test discovery
// lists the tests on machines without a GPU).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cpu/layer_test_util.hpp"
#include "cuda/grouped_gemm.hpp"
#include "cuda/w4_kperm.cuh"
#include "fusedmoe/fusedmoe.hpp"
#include "fusedmoe/layer_builder.hpp"

namespace fusedmoe::gputest {

using test::Inputs;

inline bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// A [rows, k] 16-bit operand in a 4-bit kernel's k order o (w4_kperm.cuh; k % 64 == 0 for
// W4_WGMMA, % 8 for W4_MMA), as the gather / activation kernels store it with that korder.
inline std::vector<uint16_t> korder_rows(const std::vector<uint16_t>& a, cuda::KOrder o) {
  std::vector<uint16_t> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[static_cast<size_t>(cuda::korder_pos(static_cast<int64_t>(i), o))] = a[i];
  return out;
}

#define FMOE_REQUIRE_GPU()                                        \
  do {                                                            \
    if (!::fusedmoe::gputest::have_gpu()) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

// Throws (so a helper can fail a test from any depth); gtest reports the exception.
inline void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
#define FMOE_CUDA(expr) ::fusedmoe::gputest::cuda_ok((expr), #expr)

// SMs of the current device (the sm_count the kernels' launch rules take).
inline int device_sm_count() {
  int dev = 0, sms = 0;
  FMOE_CUDA(cudaGetDevice(&dev));
  FMOE_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

// Device memory owned by the object.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) FMOE_CUDA(cudaMalloc(&ptr_, bytes));
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  void upload(const void* src, size_t n) { FMOE_CUDA(cudaMemcpy(ptr_, src, n, cudaMemcpyHostToDevice)); }
  void download(void* dst, size_t n) const { FMOE_CUDA(cudaMemcpy(dst, ptr_, n, cudaMemcpyDeviceToHost)); }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// A host tensor's copy on the device and its view.
struct DeviceTensor {
  DeviceBuffer buf;
  TensorView view;
  DeviceTensor() = default;
  explicit DeviceTensor(const HostTensor& h) : buf(h.bytes.size()) {
    if (!h.bytes.empty()) buf.upload(h.bytes.data(), h.bytes.size());
    view = h.view();
    view.data = buf.get();
    view.device = DeviceType::CUDA;
    view.device_index = 0;
  }
};

// A layer file's tensors on the device, and the weights viewing them.
struct DeviceLayer {
  std::map<std::string, std::unique_ptr<DeviceTensor>> tensors;
  LayerWeights weights;
  explicit DeviceLayer(const LayerFile& lf) {
    auto put = [&](const char* name, TensorView* dst) {
      auto it = lf.tensors.find(name);
      if (it == lf.tensors.end()) return;
      auto t = std::make_unique<DeviceTensor>(it->second);
      *dst = t->view;
      tensors[name] = std::move(t);
    };
    put("w13_weight", &weights.w13_weight);
    put("w2_weight", &weights.w2_weight);
    put("w13_weight_scale", &weights.w13_weight_scale);
    put("w2_weight_scale", &weights.w2_weight_scale);
    put("w13_weight_scale_2", &weights.w13_weight_scale_2);
    put("w2_weight_scale_2", &weights.w2_weight_scale_2);
    put("w13_input_scale", &weights.w13_input_scale);
    put("w2_input_scale", &weights.w2_input_scale);
    put("w13_bias", &weights.w13_bias);
    put("w2_bias", &weights.w2_bias);
  }
};

// What a test case varies.
struct Case {
  Format format = Format::BF16;
  bool fp8_static = false;  // fp8-tensor: static input scales
  Activation act = Activation::SILU;
  GateUpOrder order = GateUpOrder::GATE_UP;
  bool interleaved = false;
  bool bias = false;
  bool on_input = false;
  DType hidden_dtype = DType::BF16;
  int64_t M = 37, K = 256, N = 128, E = 8, topk = 2;
  uint64_t seed = 1;
  float w_gain = 1.0f;  // weights' std = w_gain / sqrt(fan-in)
  // 4-bit formats
  ActDtype act_dtype = ActDtype::BF16;  // mxfp4 / nvfp4 activations
  bool swizzled = false;                // mxfp4 / nvfp4: 128x4-swizzled weight scales
  bool uint4b8 = false;                 // w4a8: stored q + 8
};

inline float tolerance(const Case& c) {
  float tol = 1e-2f;
  if (c.format == Format::FP32) tol = c.hidden_dtype == DType::F32 ? 1e-5f : 2e-3f;
  if (c.format == Format::FP8_TENSOR || c.format == Format::FP8_CHANNEL || c.format == Format::FP8_BLOCK) tol = 5e-2f;
  // Quantised activations (fp8 per token, nvfp4): a GEMM1 sum that rounds differently can move
  // an activation across a quantisation boundary.
  if (c.format == Format::W4A8_INT4 || c.act_dtype != ActDtype::BF16) tol = 5e-2f;
  return tol;
}

inline std::string describe(const Case& c) {
  std::string s = std::string(format_name(c.format)) + (c.format == Format::FP8_TENSOR ? (c.fp8_static ? "/static" : "/dynamic") : "") +
                  " " + activation_name(c.act) + (c.interleaved ? "/interleaved" : "") + " " + gate_up_order_name(c.order) +
                  (c.bias ? " bias" : "") + (c.on_input ? " on_input" : "") + " x=" + dtype_name(c.hidden_dtype) +
                  " M=" + std::to_string(c.M) + " K=" + std::to_string(c.K) + " N=" + std::to_string(c.N) +
                  " E=" + std::to_string(c.E) + " topk=" + std::to_string(c.topk) + " seed=" + std::to_string(c.seed) +
                  (c.format == Format::MXFP4 || c.format == Format::NVFP4 ? std::string(" act=") + act_dtype_name(c.act_dtype) : "") +
                  (c.swizzled ? " swizzled" : "") + (c.uint4b8 ? " uint4b8" : "");
  return s;
}

// A random layer in c.format (host, layer-file form).
inline LayerFile make_layer(const Case& c) {
  LayerConfig cfg;
  cfg.activation = c.act;
  cfg.gate_up_order = c.order;
  cfg.interleaved = c.interleaved;
  // Weights drawn for fan-in K (GEMM1); GEMM2's are rescaled below to fan-in N.
  FloatLayer fl = random_float_layer(cfg, c.E, c.K, c.N, c.seed, c.bias, c.w_gain / std::sqrt(float(c.K)));
  const float g2 = std::sqrt(float(c.K) / float(c.N));
  for (float& v : fl.w2) v *= g2;
  QuantizeOptions q;
  q.format = c.format;
  if (c.format == Format::FP8_TENSOR && c.fp8_static) {
    q.fp8_w13_input_scale = 5.0f / 448.0f;  // |x| <= ~5 for unit normal inputs
    q.fp8_w2_input_scale = 4.0f / 448.0f;   // some activation outputs saturate: both sides must agree
  }
  q.act_dtype = c.act_dtype;
  if (c.act_dtype == ActDtype::NVFP4) {
    q.nvfp4_w13_act_amax = 5.0f;
    q.nvfp4_w2_act_amax = 4.0f;
  }
  LayerFile lf = quantize_layer(fl, q);
  if (c.swizzled) {  // the same scales in the 128x4 layout, expert by expert
    lf.config.weight_scale_layout = ScaleLayout::SWIZZLED_128x4;
    for (const char* name : {"w13_weight_scale", "w2_weight_scale"}) {
      HostTensor& t = lf.tensors.at(name);
      const int64_t E = t.shape[0], rows = t.shape[1], cols = t.shape[2];
      const size_t per = swizzled_scale_bytes(rows, cols);
      HostTensor sw(t.dtype, {E, (rows + 127) / 128 * 128, (cols + 3) / 4 * 4});
      for (int64_t e = 0; e < E; ++e)
        swizzle_scales_128x4(t.data<uint8_t>() + e * rows * cols, rows, cols, sw.data<uint8_t>() + e * per);
      t = sw;
    }
  }
  if (c.uint4b8) {  // stored q + 8: flip the top bit of every nibble
    lf.config.int4_encoding = Int4Encoding::UINT4B8;
    for (const char* name : {"w13_weight", "w2_weight"})
      for (uint8_t& b : lf.tensors.at(name).bytes) b ^= 0x88u;
  }
  return lf;
}

// Random inputs; ids drawn from [0, num_ids) (distinct per token while topk <= num_ids).
inline Inputs make_inputs(const Case& c, int64_t num_ids) {
  Inputs in = test::random_inputs(c.M, c.K, c.topk, num_ids, c.hidden_dtype, c.seed * 7919u + 17u);
  in.on_input = c.on_input;
  return in;
}

// The inputs on the device plus an output buffer and the workspace.
struct DeviceRun {
  DeviceTensor hidden, ids, weights, map;
  DeviceBuffer out, workspace;
  RunArgs args;
  size_t out_bytes = 0;
  DeviceRun(const Layer& layer, const Inputs& in)
      : hidden(in.hidden), ids(in.ids), weights(in.weights) {
    if (in.has_map) map = DeviceTensor(in.expert_map);
    out_bytes = in.hidden.bytes.size();
    out = DeviceBuffer(out_bytes);
    const int64_t M = in.hidden.shape[0], topk = in.ids.shape[1];
    workspace = DeviceBuffer(layer.workspace_size(M, topk));
    args.hidden_states = hidden.view;
    args.topk_ids = ids.view;
    args.topk_weights = weights.view;
    if (in.has_map) args.expert_map = map.view;
    args.output = in.hidden.view();
    args.output.data = out.get();
    args.output.device = DeviceType::CUDA;
    args.apply_router_weight_on_input = in.on_input;
    args.workspace = workspace.get();
    args.workspace_bytes = workspace.bytes();
  }
  // NaN bytes in every element (0xFF.. is NaN in bf16, fp16 and fp32).
  void poison(cudaStream_t s = nullptr) {
    if (out_bytes) FMOE_CUDA(cudaMemsetAsync(out.get(), 0xFF, out_bytes, s));
  }
  HostTensor result(const Inputs& in) const {
    HostTensor h(in.hidden.dtype, in.hidden.shape);
    if (out_bytes) out.download(h.bytes.data(), out_bytes);
    return h;
  }
};

// One poisoned run on `stream`, synchronised; returns the output.
inline HostTensor run_gpu(const Layer& layer, const Inputs& in, cudaStream_t stream = nullptr) {
  DeviceRun r(layer, in);
  r.args.stream = stream;
  r.poison(stream);
  layer.run(r.args);
  FMOE_CUDA(cudaStreamSynchronize(stream));
  FMOE_CUDA(cudaGetLastError());
  return r.result(in);
}

inline HostTensor run_oracle(const LayerFile& lf, const Inputs& in) {
  return test::run_layer(lf, in, CpuPrecision::ORACLE_FP64);
}

// Relative Frobenius error of the GPU output against the oracle; every element must be finite
// (an unwritten element is still NaN from the poison).
inline ::testing::AssertionResult matches_oracle(const HostTensor& gpu, const HostTensor& ref, double tol) {
  const std::vector<double> a = test::to_double(gpu), b = test::to_double(ref);
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return ::testing::AssertionFailure() << "element " << i << " is " << a[i] << " (unwritten or overflow)";
    if (!std::isfinite(b[i])) return ::testing::AssertionFailure() << "oracle element " << i << " is " << b[i];
  }
  const double err = test::rel_error(a, b);
  if (err <= tol) return ::testing::AssertionSuccess() << "rel error " << err;
  return ::testing::AssertionFailure() << "relative Frobenius error " << err << " > " << tol;
}

// The GPU layer of case c refuses a call: can_implement() says no with a reason that holds one
// of `reasons`, and run() throws NotImplemented instead of running.
inline void expect_refused(const Case& c, std::initializer_list<const char*> reasons) {
  const LayerFile lf = make_layer(c);
  DeviceLayer dl(lf);
  Layer layer(lf.config, dl.weights);
  const Inputs in = make_inputs(c, c.E);
  DeviceRun run(layer, in);
  const Support s = layer.can_implement(layer.validate(run.args));
  EXPECT_FALSE(s.ok);
  bool named = false;
  for (const char* r : reasons) named = named || s.reason.find(r) != std::string::npos;
  EXPECT_TRUE(named) << s.reason;
  EXPECT_THROW(layer.run(run.args), NotImplemented);
}

// Runs `in` through the layer on the GPU (a plain run on a fresh stream, then a second run
// captured in a CUDA graph and replayed into a re-poisoned output) and on the float64 oracle:
// the first output must match the oracle within the case's tolerance, the replay bitwise.
inline void check_against_oracle(const Case& c, const LayerFile& lf, const Inputs& in) {
  SCOPED_TRACE(describe(c));
  DeviceLayer dl(lf);
  Layer layer(lf.config, dl.weights);
  ASSERT_EQ(layer.backend(), Backend::CUDA);
  DeviceRun run(layer, in);
  const Support s = layer.can_implement(layer.validate(run.args));
  if (!s.ok && s.reason.find("FUSEDMOE_SKIP_GPU_FORMATS") != std::string::npos) GTEST_SKIP() << s.reason;
  ASSERT_TRUE(s.ok) << s.reason;

  cudaStream_t stream;
  FMOE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  run.args.stream = stream;
  run.poison(stream);
  layer.run(run.args);
  FMOE_CUDA(cudaStreamSynchronize(stream));
  const HostTensor first = run.result(in);

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  FMOE_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  layer.run(run.args);
  FMOE_CUDA(cudaStreamEndCapture(stream, &graph));
  FMOE_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  run.poison(stream);
  FMOE_CUDA(cudaGraphLaunch(exec, stream));
  FMOE_CUDA(cudaStreamSynchronize(stream));
  const HostTensor replay = run.result(in);
  FMOE_CUDA(cudaGraphExecDestroy(exec));
  FMOE_CUDA(cudaGraphDestroy(graph));
  FMOE_CUDA(cudaStreamDestroy(stream));

  const HostTensor ref = run_oracle(lf, in);
  const double err = test::rel_error(test::to_double(first), test::to_double(ref));
  std::printf("[ rel-err  ] %.3g (tol %.0e) %s\n", err, tolerance(c), describe(c).c_str());
  ::testing::Test::RecordProperty("rel_error", std::to_string(err));
  EXPECT_TRUE(matches_oracle(first, ref, tolerance(c)));
  EXPECT_TRUE(test::bitwise_equal(first, replay)) << "graph replay differs from the first run";
}

// A random layer and random inputs (ids from [0, num_ids), default E) for the case.
inline void check_case(const Case& c, int64_t num_ids = -1) {
  check_against_oracle(c, make_layer(c), make_inputs(c, num_ids < 0 ? c.E : num_ids));
}

// Runs fn() and checks whether it launched the fused GEMM1 + activation kernel `kind`: the fused
// and unfused paths give the same bits, so only the launch count tells which one a test covered.
template <class Fn>
void expect_fused_gemm1(cuda::FusedGemm1 kind, bool fused, Fn fn) {
  const int64_t before = cuda::fused_gemm1_launches(kind);
  fn();
  if (fused) EXPECT_GT(cuda::fused_gemm1_launches(kind), before) << "the fused GEMM1 + activation did not run";
  else EXPECT_EQ(cuda::fused_gemm1_launches(kind), before) << "the fused GEMM1 + activation ran";
}

}  // namespace fusedmoe::gputest
