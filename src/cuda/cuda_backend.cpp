// The CUDA backend (Hopper): permute -> grouped GEMM1 -> activation -> grouped GEMM2 -> finalize.
//
// run() is CUDA-graph capturable: every stage is launched on args.stream, nothing is allocated
// and the host never waits; all temporaries are carved from args.workspace (layout below, each
// sub-buffer 256-byte aligned). The number of rows per expert stays on the device: kernels are
// launched for the upper bound M * topk rows and the surplus blocks exit at once.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/decode_layer.hpp"
#include "cuda/env_switch.hpp"
#include "cuda/grouped_gemm.hpp"
#include "cuda/moe_kernels.hpp"
#include "cuda/small_m_activation.hpp"
#include "cuda/stream_gemm.hpp"
#include "cuda/small_m_finalize.hpp"
#include "cuda/api_kernels.hpp"
#include "cuda/w4_gemm.hpp"
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
  float* w13_scale_tiles = nullptr; // fp8-block: GEMM1's weight scales in the fused GEMM1's tile order
  float* staging = nullptr;      // fp8 dynamic / per-row: [slots, N]
  void* y = nullptr;             // GEMM2 output [slots, K], fp32 (K * 4 bytes a row) or bf16 (g2.d_dtype)
  float* amax1 = nullptr;        // fp8-tensor dynamic scales (amax as float bits)
  float* amax2 = nullptr;
  void* gemm_ws = nullptr;       // shared by both GEMMs (they run one after the other)
  void* w4_decoded = nullptr;    // 4-bit formats, dequant way: decoded weights of a chunk of experts
};

// FUSEDMOE_W4_WGMMA_MIN_ROWS=R (a same-binary A/B switch): the 4-bit large-batch way's wgmma kernels from R expected
// rows per active expert instead of w4_wgmma_min_rows_per_expert (below R the mma kernel runs).
int64_t w4_wgmma_min_rows(Format f) {
  static const int64_t env_rows = [] {
    const char* e = std::getenv("FUSEDMOE_W4_WGMMA_MIN_ROWS");
    if (e == nullptr) return int64_t{0};
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    if (end == e || *end != '\0' || v < 1)
      throw Error(std::string("FUSEDMOE_W4_WGMMA_MIN_ROWS: expected a positive integer, got '") + e + "'");
    return static_cast<int64_t>(v);
  }();
  return env_rows > 0 ? env_rows : w4_wgmma_min_rows_per_expert(f);
}

// FUSEDMOE_FIN_EARLY=0: the 4-bit layers' activation and finalize wait for the previous kernel before
// they read anything (FinalizeParams::early, ActivationParams::early), as before 2026-11-28.
bool chain_early_off() {
  static const bool off = env_switch_is_zero("FUSEDMOE_FIN_EARLY");
  return off;
}

// FUSEDMOE_DECODE_LAYER=0: one-token calls run the kernel chain instead of the one-kernel layers (decode_layer.cu,
// decode_layer_w4.cu): a same-binary A/B of the two forms.
bool decode_layer_on() {
  static const bool on = !env_switch_is_zero("FUSEDMOE_DECODE_LAYER");
  return on;
}

bool is_w4_format(Format f) { return f == Format::W4A8_INT4 || f == Format::MXFP4 || f == Format::NVFP4; }

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
    if (is_w4_format(c.format)) {
      init_w4(c, w);
      return;
    }
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
    // A family left out of the build (FUSEDMOE_SKIP_GPU_FORMATS): can_implement() refuses the
    // layer with that reason; constructing it must not throw.
    if (op_ == Operand::FP32 || quant1_ == Fp8Quant::BLOCK || sm90_gemm_built(op_))
      gemm_ws_bytes_ = std::max(grouped_gemm_workspace_bytes(op_, path1_, E, sm_count_),
                                grouped_gemm_workspace_bytes(op_, path2_, E, sm_count_));
  }

  size_t workspace_size(int64_t max_tokens, int64_t topk) const override {
    if (!block_refusal_.empty() || max_tokens == 0) return 0;
    size_t total = 0;
    carve(nullptr, max_tokens, topk, &total);
    return total;
  }

  Support can_implement(const Problem& p) const override {
    if (!block_refusal_.empty()) return {false, block_refusal_};
    if (!w4_ && op_ != Operand::FP32 && quant1_ != Fp8Quant::BLOCK && !sm90_gemm_built(op_))
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

  // ---- the masked layout (masked.cu): E*T "tokens", top-1 to their expert, weight 1 ----
  // Workspace: ids [E*T] I32, weights [E*T] F32, then run()'s workspace for (E*T, 1).
  size_t masked_front_bytes(int64_t rows) const { return 2 * align_up(static_cast<size_t>(rows) * 4); }

  size_t masked_workspace_size(int64_t T) const override {
    if (!block_refusal_.empty() || T == 0) return 0;
    const int64_t rows = shape_.num_experts * T;
    return masked_front_bytes(rows) + workspace_size(rows, 1);
  }

  Support can_implement_masked(const MaskedProblem& mp) const override {
    Problem p;
    p.num_tokens = mp.num_experts * mp.max_tokens_per_expert;
    p.hidden = mp.hidden;
    p.inter = mp.inter;
    p.num_experts = mp.num_experts;
    p.num_global_experts = mp.num_experts;
    p.topk = 1;
    Support s = can_implement(p);
    if (!s.ok) s.reason = "masked layout (run as E*T = " + std::to_string(p.num_tokens) + " top-1 rows): " + s.reason;
    return s;
  }

  void run_masked(const MaskedArgs& a, const MaskedProblem& mp) const override {
    const int64_t E = mp.num_experts, T = mp.max_tokens_per_expert, rows = E * T, K = shape_.hidden;
    if (rows == 0) return;
    DeviceGuard guard(device_);
    cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
    char* base = static_cast<char*>(a.workspace);
    int32_t* ids = reinterpret_cast<int32_t*>(base);
    float* weights = reinterpret_cast<float*>(base + align_up(static_cast<size_t>(rows) * 4));
    launch_masked_routing(a.expert_num_tokens.ptr<const int32_t>(), static_cast<int>(E), T, ids, weights, stream);
    const DeviceType dev = DeviceType::CUDA;
    RunArgs r;
    r.hidden_states = TensorView::contiguous(a.hidden_states.data, a.hidden_states.dtype, {rows, K}, dev, device_);
    if (mp.prequantized)
      r.hidden_states_scale = TensorView::contiguous(a.hidden_states_scale.data, DType::F32,
                                                     {rows, block_groups(K)}, dev, device_);
    r.topk_ids = TensorView::contiguous(ids, DType::I32, {rows, 1}, dev, device_);
    r.topk_weights = TensorView::contiguous(weights, DType::F32, {rows, 1}, dev, device_);
    r.output = TensorView::contiguous(a.output.data, a.output.dtype, {rows, K}, dev, device_);
    // Weight 1 on the input: x * 1 is x exactly, the fp8-tensor dynamic amax then runs over the
    // valid rows only (as the CPU oracle's masked run), and finalize sums y * 1.
    r.apply_router_weight_on_input = !mp.prequantized;
    r.workspace = base + masked_front_bytes(rows);
    r.workspace_bytes = a.workspace_bytes - masked_front_bytes(rows);
    r.stream = a.stream;
    Problem p;
    p.num_tokens = rows;
    p.hidden = K;
    p.inter = shape_.inter;
    p.num_experts = E;
    p.num_global_experts = E;
    p.topk = 1;
    run_stages(r, p, nullptr);
  }

  // ---- warm-up: one run per kernel configuration of the range on zero-filled scratch inputs ----
  void warmup(int64_t max_tokens, int64_t topk, void* stream_ptr) const override {
    if (!block_refusal_.empty() || max_tokens == 0) return;
    DeviceGuard guard(device_);
    cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
    const int64_t E = shape_.num_experts, K = shape_.hidden;
    const bool block = config_.format == Format::FP8_BLOCK;
    // Masked: as many rows as the largest contiguous problem (same GEMM config and plan path).
    const int64_t T_max = std::max<int64_t>(1, (max_tokens * topk + E - 1) / E);
    const int64_t tokens = std::max(max_tokens, E * T_max);
    const size_t ws = std::max(workspace_size(max_tokens, topk), masked_workspace_size(T_max));
    const size_t x_bytes = align_up(static_cast<size_t>(tokens * K) * 2);  // bf16, or e4m3 codes
    const size_t s_bytes = block ? align_up(static_cast<size_t>(tokens * block_groups(K)) * 4) : 0;
    const size_t ids_bytes = align_up(static_cast<size_t>(max_tokens * topk) * 4);
    const size_t out_bytes = align_up(static_cast<size_t>(tokens * K) * 2);
    const size_t total = ws + x_bytes + s_bytes + 2 * ids_bytes + out_bytes + align_up(static_cast<size_t>(E) * 4);
    void* scratch = nullptr;
    FUSEDMOE_CUDA_CHECK(cudaMalloc(&scratch, total));
    try {
      char* p = static_cast<char*>(scratch);
      void* wsp = p;
      char* x = p + ws;
      float* xs = reinterpret_cast<float*>(x + x_bytes);
      int32_t* ids = reinterpret_cast<int32_t*>(x + x_bytes + s_bytes);
      float* tw = reinterpret_cast<float*>(reinterpret_cast<char*>(ids) + ids_bytes);
      void* out = reinterpret_cast<char*>(tw) + ids_bytes;
      int32_t* counts = reinterpret_cast<int32_t*>(static_cast<char*>(out) + out_bytes);
      FUSEDMOE_CUDA_CHECK(cudaMemsetAsync(x, 0, x_bytes + s_bytes, stream));
      FUSEDMOE_CUDA_CHECK(cudaMemsetAsync(tw, 0, ids_bytes, stream));
      // Slot i selects expert i % E (every expert gets rows); counts: T_max each.
      std::vector<int32_t> ids_h(static_cast<size_t>(max_tokens * topk));
      for (size_t i = 0; i < ids_h.size(); ++i) ids_h[i] = static_cast<int32_t>(i % static_cast<size_t>(E));
      FUSEDMOE_CUDA_CHECK(cudaMemcpyAsync(ids, ids_h.data(), ids_h.size() * 4, cudaMemcpyHostToDevice, stream));
      std::vector<int32_t> counts_h(static_cast<size_t>(E), static_cast<int32_t>(T_max));
      FUSEDMOE_CUDA_CHECK(cudaMemcpyAsync(counts, counts_h.data(), counts_h.size() * 4, cudaMemcpyHostToDevice, stream));
      const DeviceType dev = DeviceType::CUDA;
      auto contiguous_run = [&](int64_t M, bool prequantized) {
        RunArgs r;
        r.hidden_states = TensorView::contiguous(x, prequantized ? DType::F8_E4M3 : DType::BF16, {M, K}, dev, device_);
        if (prequantized) r.hidden_states_scale = TensorView::contiguous(xs, DType::F32, {M, block_groups(K)}, dev, device_);
        r.topk_ids = TensorView::contiguous(ids, DType::I32, {M, topk}, dev, device_);
        r.topk_weights = TensorView::contiguous(tw, DType::F32, {M, topk}, dev, device_);
        r.output = TensorView::contiguous(out, DType::BF16, {M, K}, dev, device_);
        r.workspace = wsp;
        r.workspace_bytes = ws;
        r.stream = stream;
        Problem pr;
        pr.num_tokens = M;
        pr.hidden = K;
        pr.inter = shape_.inter;
        pr.num_experts = E;
        pr.num_global_experts = E;
        pr.topk = topk;
        run_stages(r, pr, nullptr);
      };
      auto masked_run = [&](int64_t T, bool prequantized) {
        MaskedArgs m;
        m.hidden_states = TensorView::contiguous(x, prequantized ? DType::F8_E4M3 : DType::BF16, {E, T, K}, dev, device_);
        if (prequantized)
          m.hidden_states_scale = TensorView::contiguous(xs, DType::F32, {E, T, block_groups(K)}, dev, device_);
        m.expert_num_tokens = TensorView::contiguous(counts, DType::I32, {E}, dev, device_);
        m.output = TensorView::contiguous(out, DType::BF16, {E, T, K}, dev, device_);
        m.workspace = wsp;
        m.workspace_bytes = ws;
        m.stream = stream;
        MaskedProblem mp;
        mp.num_experts = E;
        mp.max_tokens_per_expert = T;
        mp.hidden = K;
        mp.inter = shape_.inter;
        mp.prequantized = prequantized;
        run_masked(m, mp);
      };
      // Token counts 1, 2, 4, ... and the largest: every plan path and GEMM path / tile config
      // the range selects (the choices switch at row-count thresholds) is launched once. The
      // small problems cost little next to the largest one.
      auto counts_up_to = [](int64_t hi) {
        std::vector<int64_t> v;
        for (int64_t m = 1; m < hi; m *= 2) v.push_back(m);
        v.push_back(hi);
        return v;
      };
      for (int64_t M : counts_up_to(max_tokens)) {
        contiguous_run(M, false);
        if (block) contiguous_run(M, true);
      }
      for (int64_t T : counts_up_to(T_max)) {
        masked_run(T, false);
        if (block) masked_run(T, true);
      }
      FUSEDMOE_CUDA_CHECK(cudaStreamSynchronize(stream));
    } catch (...) {
      cudaStreamSynchronize(stream);
      cudaFree(scratch);
      throw;
    }
    FUSEDMOE_CUDA_CHECK(cudaFree(scratch));
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
    b.y = take(s * K * 4);
    b.gemm_ws = take(gemm_ws_bytes_);
    if (quant1_ == Fp8Quant::BLOCK)
      b.w13_scale_tiles = static_cast<float*>(take(gemm1_block_act_scale_bytes(static_cast<int>(E), R, K)));
    if (w4_ && w4_large_batch(slots)) {
      // The decoded copy is only for a GEMM the wgmma kernel cannot take (w4_wgmma.cu).
      if (!w4_wgmma1_ || !w4_wgmma2_) b.w4_decoded = take(w4_chunk_experts_ * w4_expert_bytes_);
    }
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
    const DType act_dtype = args.output.dtype;  // == hidden dtype unless pre-quantised (fp8 codes)
    const float* tw = args.topk_weights.ptr<const float>();

    mark(0);
    // ---- the parameters of the permute, GEMM1 and activation stages (nothing launched yet) ----
    GatherParams gp;
    gp.x = args.hidden_states.data;
    gp.x_dtype = args.hidden_states.dtype;
    gp.K = K;
    gp.topk = topk;
    gp.topk_weights = tw;
    gp.on_input = args.apply_router_weight_on_input;
    gp.row_slot = b.plan.row_slot;
    gp.rows = rows;
    gp.M = M;
    gp.slot_row = b.plan.slot_row;
    // W4A8 at large batches (its wgmma kernel) multiplies e4m3 codes on the fp8 tensor cores; its
    // mma way (and the other 4-bit formats) take them as 16-bit values.
    const Operand op_run = config_.format == Format::W4A8_INT4 && w4_large_batch(slots) ? Operand::FP8 : op_;
    gp.out = b.a1;
    gp.op = op_run;
    gp.quant = quant1_;
    gp.korder = w4_korder(slots, true);  // the 4-bit kernels' operands in their k order
    gp.row_scale = b.row_scale1;
    gp.block = {b.block_scale1, b.plan.row_expert, b.plan.expert_offsets, config_.fp8_block_ue8m0};
    if (quant1_ == Fp8Quant::NVFP4) gp.nvfp4_input_scale = weights_.w13_input_scale.ptr<const float>();
    TensorScale scale1;
    if (quant1_ == Fp8Quant::TENSOR_STATIC) scale1 = {weights_.w13_input_scale.ptr<const float>(), false};
    if (quant1_ == Fp8Quant::TENSOR_DYNAMIC) scale1 = {b.amax1, true};
    gp.scale = scale1;
    // GEMM1
    GroupedGemmArgs g1;
    g1.op = op_run;
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
    // The decode fusions (GEMM1 + activation, GEMM2 + finalize), where the kernels can do the call
    // and fusing pays (small_m_fusion_pays). Decode-size GEMMs run on the small-M kernels only in
    // front of them; the other small calls stream on the stream GEMM (GroupedGemmArgs::small_m_ok).
    g1.a_scale = b.block_scale1;
    g1.b_scale = weights_.w13_weight_scale.present() ? weights_.w13_weight_scale.ptr<const float>() : nullptr;
    g1.b_scale_tiles = b.w13_scale_tiles;
    const float* w2_scale = weights_.w2_weight_scale.present() ? weights_.w2_weight_scale.ptr<const float>() : nullptr;
    const bool fuse = !w4_ && small_m_fusion_pays(M, topk, E);
    g1.small_m_ok = fuse;  // until decode_stream below
    // h stays fp32: bf16 h and y together were measured on an H200 (2026-11-21) at 0.3-4% (bf16)
    // and 1-11% (fp8) faster at M >= 1024 but raised the worst error against the float64 oracle
    // from 2e-4 to 5e-3 (bf16) and from 5e-3 to 2.6e-2 (fp8-tensor), and were removed; y alone
    // is bf16 at large batches with a bf16 output (GEMM2 below).

    // activation
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
    ap.dq = dequant(weights_.w13_weight_scale, scale1, b.row_scale1, weights_.w13_weight_scale_2,
                    weights_.w13_input_scale);
    ap.act_dtype = act_dtype;
    ap.out = b.a2;
    ap.op = op_run;
    ap.quant = quant2_;
    ap.korder = w4_korder(slots, false);
    TensorScale scale2;
    if (quant2_ == Fp8Quant::TENSOR_STATIC) scale2 = {weights_.w2_input_scale.ptr<const float>(), false};
    if (quant2_ == Fp8Quant::TENSOR_DYNAMIC) scale2 = {b.amax2, true};
    ap.scale = scale2;
    ap.amax_bits = b.amax2;
    ap.staging = b.staging;
    ap.row_scale = b.row_scale2;
    ap.block = {b.block_scale2, b.plan.row_expert, b.plan.expert_offsets, config_.fp8_block_ue8m0};
    if (quant2_ == Fp8Quant::NVFP4) ap.nvfp4_input_scale = weights_.w2_input_scale.ptr<const float>();
    // (fp8-block GEMM1 stays unfused: its 1x128 quantisation of the activation output needs the
    // amax of 128 outputs from several blocks; a cluster-of-blocks version was 3-10% slower at
    // M = 1 / 2, bench/results/2026-11-21-h100-fp8-block-small-m.)
    // Where the decode fusions pay, GEMM1 still streams on the stream GEMM when its grid is large
    // enough (stream_gemm1_decode_pays) and it loses no fusion there: with its activation
    // (stream_gemm1_act_applies), or where the small-M kernel would not fuse it either (fp8-block,
    // fp8-channel). GEMM2 + finalize stay on the small-M kernel.
    GroupedGemmArgs g1_stream = g1;
    g1_stream.small_m_ok = false;
    const bool small_m_act = path1_ == GemmPath::SM90_TMA && small_m_activation_applies(g1, ap);
    const bool decode_stream = fuse && stream_gemm_takes(g1_stream, path1_) &&
                               stream_gemm1_decode_pays(g1_stream) &&
                               (!small_m_act || stream_gemm1_act_applies(g1_stream, path1_, ap));
    g1.small_m_ok = fuse && !decode_stream;
    const bool gemm1_fused = fuse && !decode_stream && small_m_act;
    // The plan inside the gather kernel (one launch less) only in front of the fused GEMM1 +
    // activation or the stream GEMM1, which wait before they read the plan anyway. In front of the
    // small-M GEMM1 the plan must be two kernels back, or that GEMM waits before its first weight loads
    // (offsets_final_at_launch), and the layer measured 1.6-3.4% slower (fp8-channel, Mixtral
    // M = 2; bench/results/2026-11-21-h100-5be2e5d-plan-gather-race-fix).
    // The 4-bit GEMMs wait for the previous kernel before their first load anyway (chain_wait()
    // first), so for them the plan inside the gather is one launch less at decode sizes
    // (bench/results/2026-11-22-h100-w4-plan-in-gather).
    const bool plan_in_gather = (gemm1_fused || w4_ || decode_stream) &&
                                args.hidden_states.dtype != DType::F8_E4M3 && plan_gather_fused_applies(gp, slots);
    g1.offsets_final_at_launch = !plan_in_gather;
    // GEMM1 + activation with its A rows gathered by token inside the mainloop
    // (sm90_gemm1_gather_applies, sm90_gather_a_mainloop.cuh): bf16 reads hidden_states itself,
    // static fp8-tensor and fp8-channel (per-token scales) one row of codes per token
    // (launch_token_codes, into a1's buffer; fp8-channel also writes each slot row's scale), and
    // the permute writes no slot rows - at 4096 tokens of DeepSeek-V3 topk x 7168 bytes per token
    // (fp8) written and read back before.
    const bool gather_source =
        !gp.on_input &&
        (op_run == Operand::BF16
             ? args.hidden_states.dtype == DType::BF16
             : op_run == Operand::FP8 && (quant1_ == Fp8Quant::TENSOR_STATIC || quant1_ == Fp8Quant::ROW) &&
                   args.hidden_states.dtype != DType::F8_E4M3 && token_codes_applies(gp));
    const void* gather_x = op_run == Operand::FP8 ? b.a1 : args.hidden_states.data;
    const bool gather1 = !w4_ && !gemm1_fused && !decode_stream && !plan_in_gather && gather_source &&
                         (sm90_gemm1_gather_applies(g1, path1_, ap, gather_x, M) ||
                          stream_gemm1_gather_applies(g1, path1_, ap, gather_x, M));
    if (gather1) {
      g1.gather_x = gather_x;
      g1.gather_row_slot = b.plan.row_slot;
      g1.gather_topk = static_cast<int>(topk);
    }

    const int32_t* ids = args.topk_ids.ptr<const int32_t>();
    const int32_t* emap = args.expert_map.present() ? args.expert_map.ptr<const int32_t>() : nullptr;

    // The top-k sum (finalize, or its fused forms); y and its dtype are set with GEMM2 below.
    FinalizeParams fp;
    fp.M = M;
    fp.K = K;
    fp.topk = topk;
    fp.slot_row = b.plan.slot_row;
    fp.row_expert = b.plan.row_expert;
    fp.topk_weights = tw;
    fp.on_input = args.apply_router_weight_on_input;
    fp.bias = weights_.w2_bias.present() ? weights_.w2_bias.ptr<const float>() : nullptr;
    fp.dq = dequant(weights_.w2_weight_scale, scale2, b.row_scale2, weights_.w2_weight_scale_2,
                    weights_.w2_input_scale);
    fp.out = args.output.data;
    fp.out_dtype = args.output.dtype;

    // ---- one token on small experts (fp8-tensor, fp8-block, fp8-channel; static or dynamic
    // scales): the whole layer in one kernel (decode_layer.cu) ----
    // Its time is the GEMM1 stage of run_timed(); the other stages read 0.
    // 4-bit weights (MXFP4 / NVFP4 with bf16 activations, MXFP4 with fp8 activations, W4A8,
    // NVFP4 W4A4): the same in decode_layer_w4.cu.
    if (M == 1 && args.hidden_states.dtype != DType::F8_E4M3) {
      DecodeLayerParams dl;
      dl.ids = ids;
      dl.expert_map = emap;
      dl.num_experts = E;
      dl.num_global = p.num_global_experts;
      dl.gather = gp;
      dl.w13 = weights_.w13_weight.data;
      dl.w2 = weights_.w2_weight.data;
      dl.act = ap;
      dl.fin = fp;
      if (quant1_ == Fp8Quant::BLOCK) {
        dl.w13_scale = g1.b_scale;
        dl.w2_scale = w2_scale;
      }
      // fp8-block / fp8-channel / dynamic fp8-tensor: the activation row before its quantisation
      // ([slots, R] fp32, unused otherwise on this path).
      if (quant1_ == Fp8Quant::BLOCK || quant1_ == Fp8Quant::ROW || quant1_ == Fp8Quant::TENSOR_DYNAMIC ||
          quant1_ == Fp8Quant::NVFP4)
        dl.stage = b.h;
      dl.sm_count = sm_count_;
      if (w4_) {
        dl.w4 = true;
        dl.w4_13 = w4_weights(true);
        dl.w4_2 = w4_weights(false);
      }
      if (decode_layer_on() && (w4_ ? decode_layer_w4_applies(dl) : decode_layer_applies(dl))) {
        mark(1);
        if (w4_) launch_decode_layer_w4(dl, stream);
        else launch_decode_layer(dl, stream);
        for (int i = 2; i <= 5; ++i) mark(i);
        return;
      }
    }

    // ---- permute ----
    if (!plan_in_gather) launch_plan(ids, emap, slots, E, p.num_global_experts, b.plan, stream);
    if (quant1_ == Fp8Quant::TENSOR_DYNAMIC)
      launch_gemm1_amax(gp, M, slots, b.amax1, stream);  // after the plan: the weighted rows' amax reads it
    if (args.hidden_states.dtype == DType::F8_E4M3) {
      // Pre-quantised fp8-block inputs: copy codes and scales (quantized_input.cu).
      PrequantGatherParams pq;
      pq.x = args.hidden_states.ptr<const uint8_t>();
      pq.x_scale = args.hidden_states_scale.ptr<const float>();
      pq.K = K;
      pq.topk = topk;
      pq.row_slot = b.plan.row_slot;
      pq.rows = rows;
      pq.out = static_cast<uint8_t*>(b.a1);
      pq.block = gp.block;
      launch_gather_prequantized(pq, slots, stream);
    } else if (gather1) {
      if (op_run == Operand::FP8) launch_token_codes(gp, stream);  // bf16: GEMM1 reads hidden_states
    } else if (plan_in_gather) {
      launch_plan_gather(ids, emap, slots, E, p.num_global_experts, b.plan, gp, stream);
    } else {
      launch_gather(gp, slots, stream);
    }
    mark(1);

    // ---- GEMM1 and activation ----
    // After a fused GEMM1 that wrote the activation output as bf16 rows into h's buffer: only
    // their quantisation for GEMM2 (the activation stage of run_timed()).
    auto quantise_bf16_rows = [&] {
      ActivationParams q = ap;
      q.act_bf16 = reinterpret_cast<const uint16_t*>(b.h);
      launch_activation(q, slots, stream);
    };
    if (gemm1_fused) {
      // Decode-sized calls on the small-M path: GEMM1 and the activation in one kernel (no h); its
      // time is the GEMM1 stage of run_timed() and the activation stage reads 0.
      small_m_gemm1_activation(g1, ap, stream);
      mark(2);
    } else if (!w4_ && sm90_gemm1_act_applies(g1, path1_, ap)) {  // (gather1 implies a fused kind that gathers)
      // Large batches of bf16 / static fp8-tensor layers (sm90_gemm1_act_applies): the activation
      // in GEMM1's epilogue (no h, no activation kernel); as above, the activation stage of
      // run_timed() reads 0.
      run_grouped_gemm1_act(g1, ap, stream);
      mark(2);
    } else if (!w4_ && sm90_gemm1_channel_act_applies(g1, path1_, ap)) {
      // fp8-channel at large batches: the same with per-channel dequant in the epilogue (A rows
      // gathered by token where gather1); then the per-row quantisation of the bf16 rows (the
      // activation stage of run_timed()).
      run_grouped_gemm1_channel_act(g1, ap, b.h, stream);
      mark(2);
      quantise_bf16_rows();
    } else if (!w4_ && sm90_gemm1_block_act_applies(g1, path1_, ap)) {
      // fp8-block at large batches: the activation in the blockwise GEMM1's epilogue, its output
      // rounded to bf16 into h's buffer (a quarter of the fp32 h bytes), then only the 1 x 128
      // quantisation of those rows (the activation stage of run_timed()).
      run_grouped_gemm1_block_act(g1, ap, b.h, stream);
      mark(2);
      quantise_bf16_rows();
    } else if (w4_gemm1_act_applies(slots, ap)) {
      // 4-bit MXFP4 / NVFP4 layers at large batches: the activation in the wgmma GEMM1's epilogue
      // (w4_wgmma.cu), GEMM2's bf16 operand stored there; with per-token fp8 or nvfp4 activations
      // the rows rounded to bf16 into h's buffer, then only their quantisation (the activation
      // stage of run_timed()).
      const bool rows16 = ap.quant == Fp8Quant::ROW || ap.quant == Fp8Quant::NVFP4;
      w4_wgmma_gemm1_activation(w4_weights(true), g1.a, ap, rows16 ? reinterpret_cast<uint16_t*>(b.h) : nullptr,
                                g1.groups, g1.expert_offsets, g1.max_rows, stream);
      mark(2);
      if (rows16) quantise_bf16_rows();
    } else if (w4_ && !w4_large_batch(slots) &&
               w4_mma_act_refusal(w4_weights(true), ap, g1.groups, g1.max_rows) == nullptr) {
      // 4-bit MXFP4 / NVFP4 layers at decode sizes with bf16 activations: the activation in the mma GEMM1's epilogue
      // (w4_gemm.cu kAct), GEMM2's operand stored there (no h, no activation kernel; the activation stage of
      // run_timed() reads 0).
      w4_mma_gemm1_activation(w4_weights(true), g1.a, ap, g1.groups, g1.expert_offsets, g1.max_rows, stream, sm_count_);
      mark(2);
    } else if (!w4_ && stream_gemm1_act_applies(g1, path1_, ap)) {
      // The few-rows range on the stream GEMM (stream_gemm_takes) for the same layers: its
      // weight blocks hold an output's gate and up rows, the activation in its epilogue.
      stream_gemm1_activation(g1, ap, stream);
      mark(2);
    } else if (!w4_ && stream_gemm1_block_act_applies(g1, path1_, ap)) {
      // fp8-block in the few-rows range: the same with the block scales, the activation rounded
      // to bf16 into h's buffer, then only its 1 x 128 quantisation (as the large-batch path).
      stream_gemm1_block_activation(g1, ap, b.h, stream);
      mark(2);
      quantise_bf16_rows();
    } else if (!w4_ && stream_gemm1_channel_act_applies(g1, path1_, ap)) {
      // fp8-channel in the few-rows range: per-channel dequant in the epilogue, bf16 rows, then
      // only their per-row quantisation (as the large-batch path).
      stream_gemm1_channel_activation(g1, ap, b.h, stream);
      mark(2);
      quantise_bf16_rows();
    } else {
      if (w4_) run_w4_gemm(g1, true, b, stream);
      else run_grouped_gemm(g1, path1_, stream);
      mark(2);
      // After the 4-bit GEMM1 on our own kernels (the mma and wgmma ways, chain_wait() first) the plan and
      // GEMM1's row scales are two chained kernels back: the activation may read its rows' experts and
      // factors before its wait (ActivationParams::early; FUSEDMOE_FIN_EARLY=0 turns it off with the finalize's).
      ActivationParams a1 = ap;
      a1.early = !chain_early_off() && w4_chained_gemm(g1, true);
      launch_activation(a1, slots, stream);
    }
    mark(3);

    // ---- GEMM2 ----
    GroupedGemmArgs g2 = g1;
    g2.gather_x = nullptr;  // GEMM2's A is the activation's output, in the expert-grouped order
    g2.gather_row_slot = nullptr;
    g2.small_m_ok = fuse;
    g2.a = b.a2;
    g2.b = weights_.w2_weight.data;
    g2.d = b.y;
    g2.n = K;
    g2.k = N;
    g2.a_scale = b.block_scale2;
    g2.b_scale = w2_scale;
    g2.offsets_final_at_launch = true;  // the plan is two or more kernels back (at least GEMM1 between)
    // y rounded to bf16 where the output is bf16 and the large-M instances run (as vLLM's and
    // FlashInfer's GEMM2 outputs): half the bytes of the y round trip, which dominates GEMM2 and
    // the finalize at large batches on small experts. h stays fp32 (its rounding moves the fp8
    // requantisation: NOTES.md). Measured in src/cuda/NOTES.md, "GEMM2's y in bf16".
    if (!w4_ && args.output.dtype == DType::BF16 && sm90_bf16_d_applies(g2, path2_)) g2.d_dtype = DType::BF16;
    // The 4-bit formats keep y in fp32 (docs/NUMERICS.md: their products are exact).
    // fp8-channel with a bf16 y: the weight scale w2_scale[e, c] is applied in GEMM2's epilogue
    // before y is rounded (sm90_dequant_d_applies), and the finalize multiplies by the row's
    // activation scale only (a per-slot factor, GENERIC with a_row alone): it no longer reads the
    // [E, hidden] channel scales once per slot and column.
    if (g2.d_dtype == DType::BF16 && fp.dq.kind == Dequant::CHANNEL && sm90_dequant_d_applies(g2, path2_) &&
        !gemm2_dequant_switched_off()) {
      g2.d_col_scale = w2_scale;
      Dequant row_only;
      row_only.kind = Dequant::GENERIC;
      row_only.a_row = fp.dq.a_row;
      fp.dq = row_only;
    }

    // ---- finalize ----
    fp.y = b.y;  // the rest above (the one-token kernel takes the same parameters)
    fp.y_dtype = g2.d_dtype;
    // Decode-sized calls on the small-M path: GEMM2 and finalize in one kernel (no y); its time
    // is the GEMM2 stage of run_timed() and the finalize stage reads 0.
    if (fuse && small_m_takes(g2, path2_) && small_m_finalize_applies(g2, fp)) {
      small_m_gemm2_finalize(g2, fp, stream, path2_ == GemmPath::SM90_FP8_BLOCK);
      mark(4);
      mark(5);
      return;
    }
    // One-token grids of few warps (gpt-oss-120b): the 4-bit GEMM2 splits k in two, the second half's sums into h's
    // buffer (free once the activation has read it; [slots, R] holds [slots, K] when K <= R), the finalize adds them.
    float* y2 = nullptr;
    if (w4_ && !w4_large_batch(g2.max_rows) && K <= R &&
        w4_mma_split_pays(w4_weights(false), g2.groups, g2.max_rows, sm_count_))
      y2 = b.h;
    if (w4_) run_w4_gemm(g2, false, b, stream, y2);
    else run_grouped_gemm(g2, path2_, stream);
    fp.y2 = y2;
    mark(4);
    // The 4-bit GEMM2 on our own kernels (the mma and wgmma ways, chain_wait() first) is one chained
    // kernel after GEMM1 (and the activation), so the plan and the row scales the finalize reads are
    // final when it starts (FinalizeParams::early). FUSEDMOE_FIN_EARLY=0 turns it off (A/B runs).
    fp.early = !chain_early_off() && w4_chained_gemm(g2, false);
    launch_finalize(fp, stream);
    mark(5);
  }

  // The GEMM output scale of the fp8 formats: activation scale x weight scale; of the 4-bit
  // formats: the per-row fp8 activation scale, the nvfp4 activation input scale (1 / gs) and the
  // nvfp4 weight scale_2 (the block scales are inside the GEMM).
  Dequant dequant(const TensorView& w_scale, const TensorScale& a_tensor, const float* a_row, const TensorView& w_scale_2,
                  const TensorView& input_scale) const {
    Dequant d;
    if (w4_) {
      d.kind = Dequant::GENERIC;
      d.a_row = a_row;
      if (config_.format == Format::NVFP4) {
        d.w_expert = w_scale_2.ptr<const float>();
        if (config_.act_dtype == ActDtype::NVFP4) d.a_expert = input_scale.ptr<const float>();
      }
      return d;
    }
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

  // ---- 4-bit formats (w4_gemm.hpp) ----
  void init_w4(const LayerConfig& c, const LayerWeights& w) {
    w4_ = true;
    op_ = c.format == Format::W4A8_INT4 ? Operand::FP16 : Operand::BF16;
    if (c.format == Format::W4A8_INT4 || c.act_dtype == ActDtype::FP8) quant1_ = quant2_ = Fp8Quant::ROW;
    else if (c.act_dtype == ActDtype::NVFP4) quant1_ = quant2_ = Fp8Quant::NVFP4;
    const char* why = nullptr;
    if (!w4_shape_ok(w4_weights(true), &why) || !w4_shape_ok(w4_weights(false), &why)) {
      block_refusal_ = std::string(why) + " (hidden " + std::to_string(shape_.hidden) + ", intermediate " +
                       std::to_string(shape_.inter) + "); the CPU backend runs it";
      return;
    }
    // Large batches: W4A8 runs the fp8 wgmma kernel (w4a8_wgmma.cu; no CUTLASS) for both GEMMs,
    // on e4m3 activation codes. MXFP4 / NVFP4 run the bf16 wgmma kernel (w4_wgmma.cu) where the
    // GEMM's k is a multiple of 64, else decode chunk by chunk of experts to bf16 and run the SM90
    // bf16 GEMM; without that GEMM (FUSEDMOE_SKIP_GPU_FORMATS) every batch size runs the mma kernel
    // (correct, slower at large batches). The decoded buffer of an expert holds the larger of its
    // two weight matrices.
    const int64_t R = shape_.w13_rows, K = shape_.hidden, N = shape_.inter;
    if (c.format == Format::W4A8_INT4) {
      w4_large_way_ = w4a8_wgmma_shape_ok(w4_weights(true)) && w4a8_wgmma_shape_ok(w4_weights(false));
      w4_wgmma1_ = w4_wgmma2_ = w4_large_way_;
      return;
    }
    w4_large_way_ = sm90_gemm_built(op_) && sm90_gemm_shape_ok(op_, R, K, w.w13_weight.data) &&
                  sm90_gemm_shape_ok(op_, K, N, w.w2_weight.data);
    w4_wgmma1_ = w4_large_way_ && w4_wgmma_shape_ok(w4_weights(true));
    w4_wgmma2_ = w4_large_way_ && w4_wgmma_shape_ok(w4_weights(false));
    const int E = static_cast<int>(shape_.num_experts);
    w4_expert_bytes_ = static_cast<size_t>(std::max(R * K, K * N)) * 2;
    w4_chunk_experts_ = std::clamp<size_t>(kW4DequantBudget / w4_expert_bytes_, 1, static_cast<size_t>(E));
    if (w4_large_way_)
      gemm_ws_bytes_ = grouped_gemm_workspace_bytes(op_, GemmPath::SM90_TMA, static_cast<int>(w4_chunk_experts_), sm_count_);
  }

  W4Weights w4_weights(bool gemm1) const {
    const TensorView& wt = gemm1 ? weights_.w13_weight : weights_.w2_weight;
    const TensorView& sc = gemm1 ? weights_.w13_weight_scale : weights_.w2_weight_scale;
    W4Weights w;
    w.format = config_.format;
    w.uint4b8 = config_.int4_encoding == Int4Encoding::UINT4B8;
    w.swizzled = config_.weight_scale_layout == ScaleLayout::SWIZZLED_128x4;
    w.w = static_cast<const uint8_t*>(wt.data);
    w.scale = sc.data;
    w.n = gemm1 ? shape_.w13_rows : shape_.hidden;
    w.k = gemm1 ? shape_.hidden : shape_.inter;
    return w;
  }

  // The k order GEMM1's (gemm1) or GEMM2's 16-bit operand of this batch is stored in for the 4-bit
  // kernel that reads it (w4_kperm.cuh; run_w4_gemm picks the kernel): the mma kernel below the
  // large-batch rows (W4A8's int4 way and the e2m1 formats' lean one pre-paired: w4_mma_lean;
  // otherwise paired in the kernel), the MXFP4 / NVFP4 wgmma kernel above; the dequant way and
  // W4A8's fp8 wgmma way take it as is.
  KOrder w4_korder(int64_t slots, bool gemm1) const {
    if (!w4_) return KOrder::NATURAL;
    if (!w4_large_batch(slots))
      return config_.format == Format::W4A8_INT4 || w4_mma_lean(config_.format) ? KOrder::W4_MMA : KOrder::NATURAL;
    return config_.format != Format::W4A8_INT4 && (gemm1 ? w4_wgmma1_ : w4_wgmma2_) ? KOrder::W4_WGMMA : KOrder::NATURAL;
  }

  // Whether GEMM1 and the activation of this batch run as one wgmma kernel (MXFP4 / NVFP4 at
  // large batches, gated activations of a bf16 layer; GEMM2's operand unquantised, or per-token
  // fp8 / nvfp4 by a quantise pass over bf16 rows: w4_wgmma_act_refusal). W4A8 stays unfused.
  bool w4_gemm1_act_applies(int64_t slots, const ActivationParams& ap) const {
    if (!w4_ || config_.format == Format::W4A8_INT4 || !w4_wgmma1_ || !w4_large_batch(slots)) return false;
    const bool rows16 = ap.quant == Fp8Quant::ROW || ap.quant == Fp8Quant::NVFP4;
    const int64_t group = ap.quant == Fp8Quant::NVFP4 ? 16 : 8;
    if (rows16 && (ap.N % group != 0 || reinterpret_cast<uintptr_t>(ap.out) % (ap.op == Operand::FP8 ? 8 : 16) != 0))
      return false;
    return w4_wgmma_act_refusal(w4_weights(true), ap, rows16) == nullptr;
  }

  // Whether this batch takes the large-batch way (a wgmma kernel, or decode + the SM90 GEMM)
  // rather than the mma kernel.
  bool w4_large_batch(int64_t slots) const {
    const int64_t min_rows = w4_wgmma1_ && w4_wgmma2_ ? w4_wgmma_min_rows(config_.format) : kW4DequantMinRowsPerExpert;
    return w4_large_way_ && w4_use_dequant(slots, static_cast<int>(shape_.num_experts), min_rows);
  }

  // One 4-bit GEMM: the mma kernel, a wgmma kernel, or chunk by chunk of experts: decode, then the
  // SM90 GEMM.
  // Whether run_w4_gemm launches one of our chained kernels for g (the mma or wgmma way; chain_wait() first), not
  // nothing (no rows) nor the dequant way's plainly launched CUTLASS GEMM: the condition of the early reads after it.
  bool w4_chained_gemm(const GroupedGemmArgs& g, bool gemm1) const {
    return w4_ && g.max_rows > 0 && g.groups > 0 && (!w4_large_batch(g.max_rows) || (gemm1 ? w4_wgmma1_ : w4_wgmma2_));
  }
  // d2: the mma kernel's k split in two (w4_mma_split_pays), the second half's sums there.
  void run_w4_gemm(const GroupedGemmArgs& g, bool gemm1, const Buffers& b, cudaStream_t stream,
                   float* d2 = nullptr) const {
    const W4Weights w = w4_weights(gemm1);
    if (!w4_large_batch(g.max_rows)) {
      w4_mma_grouped_gemm(w, g.a, static_cast<float*>(g.d), g.groups, g.expert_offsets, g.max_rows, stream, d2,
                          sm_count_);
      return;
    }
    if (gemm1 ? w4_wgmma1_ : w4_wgmma2_) {
      if (w.format == Format::W4A8_INT4)
        w4a8_wgmma_grouped_gemm(w, static_cast<const uint8_t*>(g.a), static_cast<float*>(g.d), g.groups,
                                g.expert_offsets, g.max_rows, stream);
      else
        w4_wgmma_grouped_gemm(w, g.a, static_cast<float*>(g.d), g.groups, g.expert_offsets, g.max_rows, stream);
      return;
    }
    // MXFP4 / NVFP4 GEMMs the wgmma kernel cannot take: decode a chunk of experts, then the GEMM.
    const int E = g.groups, chunk = static_cast<int>(w4_chunk_experts_);
    for (int e0 = 0; e0 < E; e0 += chunk) {
      const int count = std::min(chunk, E - e0);
      GroupedGemmArgs c = g;
      c.groups = count;
      c.expert_offsets = g.expert_offsets + e0;
      w4_dequantize_weights(w, e0, count, g.expert_offsets, b.w4_decoded, stream);
      c.b = b.w4_decoded;
      run_grouped_gemm(c, GemmPath::SM90_TMA, stream);
    }
  }

  bool w4_ = false;
  bool w4_large_way_ = false;  // a large-batch way exists (a wgmma kernel, or decode + the SM90 GEMM)
  bool w4_wgmma1_ = false, w4_wgmma2_ = false;  // GEMM1 / GEMM2 large batches on the wgmma kernel
  size_t w4_expert_bytes_ = 0, w4_chunk_experts_ = 0;

  LayerConfig config_;
  LayerWeights weights_;
  LayerShape shape_;
  int device_ = 0;
  int sm_count_ = 0;
  std::string block_refusal_;  // fp8-block: why this layer cannot run here (empty: it can)
  Operand op_ = Operand::BF16;
  Fp8Quant quant1_ = Fp8Quant::NONE, quant2_ = Fp8Quant::NONE;
  GemmPath path1_ = GemmPath::SIMT, path2_ = GemmPath::SIMT;
  size_t gemm_ws_bytes_ = 0;
};

}  // namespace

// Built with CUDA and at least one device visible (a failed query leaves no sticky error).
bool cuda_backend_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return count > 0;
}

std::unique_ptr<BackendImpl> make_cuda_backend(const LayerConfig& config, const LayerWeights& w,
                                               const LayerShape& shape, const LayerOptions& opt) {
  return std::make_unique<CudaBackend>(config, w, shape, opt);
}

}  // namespace fusedmoe::detail
