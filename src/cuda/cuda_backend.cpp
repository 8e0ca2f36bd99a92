// The CUDA backend (Hopper): permute -> grouped GEMM1 -> activation -> grouped GEMM2 -> finalize.
//
// run() is CUDA-graph capturable: every stage is launched on args.stream, nothing is allocated
// and the host never waits; all temporaries are carved from args.workspace (layout below, each
// sub-buffer 256-byte aligned). The number of rows per expert stays on the device: kernels are
// launched for the upper bound M * topk rows and the surplus blocks exit at once.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/backend.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/grouped_gemm.hpp"
#include "cuda/moe_kernels.hpp"
#include "fusedmoe/error.hpp"

namespace fusedmoe::detail {
namespace {

using namespace fusedmoe::cuda;

constexpr size_t kAlign = 256;
size_t align_up(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

size_t operand_bytes(Operand op) {
  switch (op) {
    case Operand::FP32: return 4;
    case Operand::FP8: return 1;
    default: return 2;
  }
}

// Makes `device` current for the lifetime of the guard (restores the previous one).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    FUSEDMOE_CUDA_CHECK(cudaGetDevice(&prev_));
    if (prev_ != device) FUSEDMOE_CUDA_CHECK(cudaSetDevice(device));
    else prev_ = -1;
  }
  ~DeviceGuard() {
    if (prev_ >= 0) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

// The sub-buffers of one run's workspace.
struct Buffers {
  PlanBuffers plan;
  void* a1 = nullptr;            // GEMM1 operand [slots, K]
  float* row_scale1 = nullptr;   // fp8-channel: [slots]
  float* block_scale1 = nullptr; // fp8-block: [slots * ceil(K/128)] (BlockScaleOut layout)
  float* h = nullptr;            // GEMM1 output [slots, R] fp32
  void* a2 = nullptr;            // GEMM2 operand [slots, N]
  float* row_scale2 = nullptr;   // fp8-channel: [slots]
  float* block_scale2 = nullptr; // fp8-block: [slots * ceil(N/128)]
  float* staging = nullptr;      // fp8 dynamic / per-row: [slots, N]
  float* y = nullptr;            // GEMM2 output [slots, K] fp32
  float* amax1 = nullptr;        // fp8-tensor dynamic scales (amax as float bits)
  float* amax2 = nullptr;
  void* gemm_ws = nullptr;       // shared by both GEMMs (they run one after the other)
};

bool is_cuda_format(Format f) {
  return f == Format::BF16 || f == Format::FP16 || f == Format::FP32 || f == Format::FP8_TENSOR ||
         f == Format::FP8_CHANNEL || f == Format::FP8_BLOCK;
}

int64_t block_groups(int64_t cols) { return (cols + 127) / 128; }

class CudaBackend final : public BackendImpl {
 public:
  CudaBackend(const LayerConfig& c, const LayerWeights& w, const LayerShape& s, const LayerOptions&)
      : config_(c), weights_(w), shape_(s), device_(w.w13_weight.device_index) {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0)
      throw Error(std::string("CUDA backend: no CUDA device available (cudaGetDeviceCount: ") +
                  (err == cudaSuccess ? "0 devices" : cudaGetErrorString(err)) + ")");
    if (device_ < 0 || device_ >= count)
      throw Error("CUDA backend: the weights are on cuda:" + std::to_string(device_) + " but only " +
                  std::to_string(count) + " device(s) exist");
    cudaDeviceProp prop{};
    FUSEDMOE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    if (prop.major != 9 || prop.minor != 0)
      throw Error("CUDA backend: needs a Hopper GPU (compute capability 9.0, sm_90a); cuda:" + std::to_string(device_) +
                  " (" + prop.name + ") has " + std::to_string(prop.major) + "." + std::to_string(prop.minor));
    sm_count_ = prop.multiProcessorCount;
    supported_ = is_cuda_format(c.format);
    if (!supported_) return;  // can_implement() refuses with the reason

    switch (c.format) {
      case Format::BF16: op_ = Operand::BF16; break;
      case Format::FP16: op_ = Operand::FP16; break;
      case Format::FP32: op_ = Operand::FP32; break;
      default: op_ = Operand::FP8; break;
    }
    if (c.format == Format::FP8_TENSOR) {
      quant1_ = w.w13_input_scale.present() ? Fp8Quant::TENSOR_STATIC : Fp8Quant::TENSOR_DYNAMIC;
      quant2_ = w.w2_input_scale.present() ? Fp8Quant::TENSOR_STATIC : Fp8Quant::TENSOR_DYNAMIC;
    } else if (c.format == Format::FP8_CHANNEL) {
      quant1_ = quant2_ = Fp8Quant::ROW;
    } else if (c.format == Format::FP8_BLOCK) {
      quant1_ = quant2_ = Fp8Quant::BLOCK;
    }
    // GEMM1: [rows, K] x [R, K]^T; GEMM2: [rows, N] x [K, N]^T.
    if (c.format == Format::FP8_BLOCK) {
      // The block scales are applied inside the GEMM: only the blockwise instances can run it.
      const char* why = nullptr;
      if (!sm90_fp8_blockwise_built())
        block_refusal_ = "the fp8 blockwise GEMM kernels were left out of this build (FUSEDMOE_SKIP_GPU_FORMATS)";
      else if (!sm90_fp8_blockwise_shape_ok(shape_.w13_rows, shape_.hidden, w.w13_weight.data, &why) ||
               !sm90_fp8_blockwise_shape_ok(shape_.hidden, shape_.inter, w.w2_weight.data, &why))
        block_refusal_ = std::string(why) + " (hidden " + std::to_string(shape_.hidden) + ", intermediate " +
                         std::to_string(shape_.inter) + "); the CPU backend runs it";
      path1_ = path2_ = GemmPath::SM90_FP8_BLOCK;
    } else {
      path1_ = choose_path(shape_.w13_rows, shape_.hidden, w.w13_weight.data);
      path2_ = choose_path(shape_.hidden, shape_.inter, w.w2_weight.data);
    }
    const int E = static_cast<int>(shape_.num_experts);
    if (!block_refusal_.empty()) return;
    gemm_ws_bytes_ = std::max(grouped_gemm_workspace_bytes(op_, path1_, E, sm_count_),
                              grouped_gemm_workspace_bytes(op_, path2_, E, sm_count_));
  }

  size_t workspace_size(int64_t max_tokens, int64_t topk) const override {
    if (!supported_ || !block_refusal_.empty() || max_tokens == 0) return 0;
    size_t total = 0;
    carve(nullptr, max_tokens, topk, &total);
    return total;
  }

  Support can_implement(const Problem& p) const override {
    if (!supported_)
      return {false, std::string("format ") + format_name(config_.format) +
                         " is not implemented by the CUDA backend yet (supported: bf16, fp16, fp32, fp8-tensor, "
                         "fp8-channel, fp8-block); the CPU backend runs it"};
    if (!block_refusal_.empty()) return {false, block_refusal_};
    if (op_ != Operand::FP32 && quant1_ != Fp8Quant::BLOCK && !sm90_gemm_built(op_))
      return {false, std::string("the ") + (op_ == Operand::FP8 ? "fp8" : op_ == Operand::BF16 ? "bf16" : "fp16") +
                         " GEMM kernels were left out of this build (FUSEDMOE_SKIP_GPU_FORMATS)"};
    if (p.num_experts > kMaxExperts)
      return {false, "at most " + std::to_string(kMaxExperts) + " local experts (got " +
                         std::to_string(p.num_experts) + ")"};
    if (!finalize_supports_topk(p.topk)) return {false, "topk " + std::to_string(p.topk) + " is above the limit of 64"};
    const int64_t slots = p.num_tokens * p.topk;
    if (slots >= (int64_t(1) << 31))
      return {false, "num_tokens * topk must stay below 2^31 (got " + std::to_string(slots) + ")"};
    if (shape_.w13_rows >= (int64_t(1) << 31) || shape_.hidden >= (int64_t(1) << 31))
      return {false, "hidden and intermediate sizes must stay below 2^31"};
    return {};
  }

  void run(const RunArgs& args, const Problem& p) const override { run_stages(args, p, nullptr); }

  StageTimes run_timed(const RunArgs& args, const Problem& p) const override {
    StageTimes t;
    if (p.num_tokens == 0) return t;
    DeviceGuard guard(device_);
    cudaEvent_t ev[6];
    for (auto& e : ev) FUSEDMOE_CUDA_CHECK(cudaEventCreate(&e));
    try {
      run_stages(args, p, ev);
      FUSEDMOE_CUDA_CHECK(cudaEventSynchronize(ev[5]));
      auto ms = [&](int a, int b) {
        float v = 0;
        FUSEDMOE_CUDA_CHECK(cudaEventElapsedTime(&v, ev[a], ev[b]));
        return static_cast<double>(v);
      };
      t.permute_ms = ms(0, 1);
      t.gemm1_ms = ms(1, 2);
      t.activation_ms = ms(2, 3);
      t.gemm2_ms = ms(3, 4);
      t.finalize_ms = ms(4, 5);
      t.total_ms = ms(0, 5);
    } catch (...) {
      for (auto& e : ev) cudaEventDestroy(e);
      throw;
    }
    for (auto& e : ev) cudaEventDestroy(e);
    return t;
  }

 private:
  GemmPath choose_path(int64_t n, int64_t k, const void* b) const {
    if (op_ == Operand::FP32) return GemmPath::SIMT;
    // Shapes TMA cannot address run on the exact SIMT kernel (slow, correct).
    return sm90_gemm_shape_ok(op_, n, k, b) ? GemmPath::SM90_TMA : GemmPath::SIMT;
  }

  // The workspace layout for M tokens (base == nullptr: sizes only).
  Buffers carve(void* base, int64_t M, int64_t topk, size_t* total) const {
    const int64_t slots = M * topk;
    const int64_t E = shape_.num_experts, K = shape_.hidden, N = shape_.inter, R = shape_.w13_rows;
    const size_t s = static_cast<size_t>(slots);
    size_t off = 0;
    auto take = [&](size_t bytes) {
      void* p = static_cast<char*>(base) + off;
      off += align_up(bytes);
      return p;
    };
    Buffers b;
    b.plan.slot_expert = static_cast<int32_t*>(take(s * 4));
    b.plan.slot_row = static_cast<int32_t*>(take(s * 4));
    b.plan.row_slot = static_cast<int32_t*>(take(s * 4));
    b.plan.row_expert = static_cast<int32_t*>(take(s * 4));
    b.plan.expert_offsets = static_cast<int32_t*>(take((E + 1) * 4));
    b.plan.tile_offsets = static_cast<int32_t*>(take((E + 1) * 4));
    b.plan.chunk_counts = static_cast<int32_t*>(take(static_cast<size_t>(plan_chunks(slots) * E) * 4));
    b.amax1 = static_cast<float*>(take(4));
    b.amax2 = static_cast<float*>(take(4));
    b.a1 = take(s * K * operand_bytes(op_));
    if (quant1_ == Fp8Quant::ROW) b.row_scale1 = static_cast<float*>(take(s * 4));
    if (quant1_ == Fp8Quant::BLOCK) b.block_scale1 = static_cast<float*>(take(s * block_groups(K) * 4));
    b.h = static_cast<float*>(take(s * R * 4));
    b.a2 = take(s * N * operand_bytes(op_));
    if (quant2_ == Fp8Quant::ROW) b.row_scale2 = static_cast<float*>(take(s * 4));
    if (quant2_ == Fp8Quant::BLOCK) b.block_scale2 = static_cast<float*>(take(s * block_groups(N) * 4));
    if (quant2_ == Fp8Quant::ROW || quant2_ == Fp8Quant::TENSOR_DYNAMIC) b.staging = static_cast<float*>(take(s * N * 4));
    b.y = static_cast<float*>(take(s * K * 4));
    b.gemm_ws = take(gemm_ws_bytes_);
    *total = off;
    return b;
  }

  // Records ev[0] before the first stage and ev[i] after stage i (when ev != nullptr).
  void run_stages(const RunArgs& args, const Problem& p, cudaEvent_t* ev) const {
    if (p.num_tokens == 0) return;  // nothing to write, nothing launched
    DeviceGuard guard(device_);
    cudaStream_t stream = static_cast<cudaStream_t>(args.stream);
    auto mark = [&](int i) {
      if (ev) FUSEDMOE_CUDA_CHECK(cudaEventRecord(ev[i], stream));
    };
    const int64_t M = p.num_tokens, topk = p.topk, slots = M * topk;
    const int64_t K = shape_.hidden, N = shape_.inter, R = shape_.w13_rows;
    const int E = static_cast<int>(shape_.num_experts);
    size_t total = 0;
    const Buffers b = carve(args.workspace, M, topk, &total);
    const int32_t* rows = b.plan.expert_offsets + E;  // device row count
    const DType act_dtype = args.hidden_states.dtype;
    const float* tw = args.topk_weights.ptr<const float>();

    mark(0);
    // ---- permute ----
    launch_plan(args.topk_ids.ptr<const int32_t>(),
                args.expert_map.present() ? args.expert_map.ptr<const int32_t>() : nullptr, slots, E,
                p.num_global_experts, b.plan, stream);
    GatherParams gp;
    gp.x = args.hidden_states.data;
    gp.x_dtype = act_dtype;
    gp.K = K;
    gp.topk = topk;
    gp.topk_weights = tw;
    gp.on_input = args.apply_router_weight_on_input;
    gp.row_slot = b.plan.row_slot;
    gp.rows = rows;
    gp.out = b.a1;
    gp.op = op_;
    gp.quant = quant1_;
    gp.row_scale = b.row_scale1;
    gp.block = {b.block_scale1, b.plan.row_expert, b.plan.expert_offsets, config_.fp8_block_ue8m0};
    TensorScale scale1;
    if (quant1_ == Fp8Quant::TENSOR_STATIC) scale1 = {weights_.w13_input_scale.ptr<const float>(), false};
    if (quant1_ == Fp8Quant::TENSOR_DYNAMIC) {
      scale1 = {b.amax1, true};
      launch_gemm1_amax(gp, M, slots, b.amax1, stream);
    }
    gp.scale = scale1;
    launch_gather(gp, slots, stream);
    mark(1);

    // ---- GEMM1 ----
    GroupedGemmArgs g1;
    g1.op = op_;
    g1.a = b.a1;
    g1.b = weights_.w13_weight.data;
    g1.d = b.h;
    g1.n = R;
    g1.k = K;
    g1.groups = E;
    g1.expert_offsets = b.plan.expert_offsets;
    g1.tile_offsets = b.plan.tile_offsets;
    g1.max_rows = slots;
    g1.workspace = b.gemm_ws;
    g1.workspace_bytes = gemm_ws_bytes_;
    g1.sm_count = sm_count_;
    g1.device = device_;
    g1.a_scale = b.block_scale1;
    g1.b_scale = weights_.w13_weight_scale.present() ? weights_.w13_weight_scale.ptr<const float>() : nullptr;
    run_grouped_gemm(g1, path1_, stream);
    mark(2);

    // ---- activation ----
    ActivationParams ap;
    ap.h = b.h;
    ap.R = R;
    ap.N = N;
    ap.row_expert = b.plan.row_expert;
    ap.rows = rows;
    ap.act = config_.activation;
    ap.order = config_.gate_up_order;
    ap.interleaved = config_.interleaved;
    ap.alpha = config_.swiglu_alpha;
    ap.limit = config_.swiglu_limit;
    ap.bias = weights_.w13_bias.present() ? weights_.w13_bias.ptr<const float>() : nullptr;
    ap.dq = dequant(weights_.w13_weight_scale, scale1, b.row_scale1);
    ap.act_dtype = act_dtype;
    ap.out = b.a2;
    ap.op = op_;
    ap.quant = quant2_;
    TensorScale scale2;
    if (quant2_ == Fp8Quant::TENSOR_STATIC) scale2 = {weights_.w2_input_scale.ptr<const float>(), false};
    if (quant2_ == Fp8Quant::TENSOR_DYNAMIC) scale2 = {b.amax2, true};
    ap.scale = scale2;
    ap.amax_bits = b.amax2;
    ap.staging = b.staging;
    ap.row_scale = b.row_scale2;
    ap.block = {b.block_scale2, b.plan.row_expert, b.plan.expert_offsets, config_.fp8_block_ue8m0};
    launch_activation(ap, slots, stream);
    mark(3);

    // ---- GEMM2 ----
    GroupedGemmArgs g2 = g1;
    g2.a = b.a2;
    g2.b = weights_.w2_weight.data;
    g2.d = b.y;
    g2.n = K;
    g2.k = N;
    g2.a_scale = b.block_scale2;
    g2.b_scale = weights_.w2_weight_scale.present() ? weights_.w2_weight_scale.ptr<const float>() : nullptr;
    run_grouped_gemm(g2, path2_, stream);
    mark(4);

    // ---- finalize ----
    FinalizeParams fp;
    fp.y = b.y;
    fp.M = M;
    fp.K = K;
    fp.topk = topk;
    fp.slot_row = b.plan.slot_row;
    fp.row_expert = b.plan.row_expert;
    fp.topk_weights = tw;
    fp.on_input = args.apply_router_weight_on_input;
    fp.bias = weights_.w2_bias.present() ? weights_.w2_bias.ptr<const float>() : nullptr;
    fp.dq = dequant(weights_.w2_weight_scale, scale2, b.row_scale2);
    fp.out = args.output.data;
    fp.out_dtype = args.output.dtype;
    launch_finalize(fp, stream);
    mark(5);
  }

  // The GEMM output scale of the fp8 formats: activation scale x weight scale.
  Dequant dequant(const TensorView& w_scale, const TensorScale& a_tensor, const float* a_row) const {
    Dequant d;
    if (config_.format == Format::FP8_TENSOR) {
      d.kind = Dequant::TENSOR;
      d.a_tensor = a_tensor;
      d.w = w_scale.ptr<const float>();
    } else if (config_.format == Format::FP8_CHANNEL) {
      d.kind = Dequant::CHANNEL;
      d.a_row = a_row;
      d.w = w_scale.ptr<const float>();
    }
    return d;
  }

  LayerConfig config_;
  LayerWeights weights_;
  LayerShape shape_;
  int device_ = 0;
  int sm_count_ = 0;
  bool supported_ = false;
  std::string block_refusal_;  // fp8-block: why this layer cannot run here (empty: it can)
  Operand op_ = Operand::BF16;
  Fp8Quant quant1_ = Fp8Quant::NONE, quant2_ = Fp8Quant::NONE;
  GemmPath path1_ = GemmPath::SIMT, path2_ = GemmPath::SIMT;
  size_t gemm_ws_bytes_ = 0;
};

}  // namespace

bool cuda_backend_available() { return true; }

std::unique_ptr<BackendImpl> make_cuda_backend(const LayerConfig& config, const LayerWeights& w,
                                               const LayerShape& shape, const LayerOptions& opt) {
  return std::make_unique<CudaBackend>(config, w, shape, opt);
}

}  // namespace fusedmoe::detail
