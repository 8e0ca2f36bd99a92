// Dispatch of the grouped GEMMs: which path, its workspace, and the call.
#include "cuda/grouped_gemm.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cuda/env_switch.hpp"
#include "cuda/stream_gemm.hpp"
#include "fusedmoe/error.hpp"

namespace fusedmoe::cuda {

const char* gemm_path_name(GemmPath p) {
  switch (p) {
    case GemmPath::SM90_TMA: return "sm90-tma";
    case GemmPath::SM90_FP8_BLOCK: return "sm90-fp8-blockwise";
    default: return "simt";
  }
}

#ifdef FUSEDMOE_SKIP_GPU_FP8_BLOCKWISE
bool sm90_fp8_blockwise_built() { return false; }
size_t sm90_grouped_gemm_fp8_blockwise_workspace(int, int) { return 0; }
void sm90_grouped_gemm_fp8_blockwise(const GroupedGemmArgs&, cudaStream_t) {
  throw Error("grouped GEMM: the fp8 blockwise instances were left out of this build");
}
size_t sm90_grouped_gemm_fp8_blockwise_d16_workspace(int, int) { return 0; }
void sm90_grouped_gemm_fp8_blockwise_d16(const GroupedGemmArgs&, cudaStream_t) {
  throw Error("grouped GEMM: the fp8 blockwise instances were left out of this build");
}
size_t sm90_grouped_gemm_fp8_blockwise_act_workspace(int, int) { return 0; }
void sm90_grouped_gemm_fp8_blockwise_act(const GroupedGemmArgs&, const ActivationParams&, cudaStream_t) {
  throw Error("grouped GEMM: the fp8 blockwise instances were left out of this build");
}
#endif

bool sm90_fp8_blockwise_shape_ok(int64_t n, int64_t k, const void* b, const char** why) {
  // One K tile is one 128-wide scale block and a weight scale block must not straddle N tiles.
  if (n % 128 != 0 || k % 128 != 0) {
    *why = "the blockwise-scaled GEMM needs the hidden and intermediate sizes to be multiples of 128";
    return false;
  }
  if (n >= INT32_MAX || k >= INT32_MAX || reinterpret_cast<uintptr_t>(b) % 16 != 0) {
    *why = "the fp8-block weights must be 16-byte aligned (TMA)";
    return false;
  }
  return true;
}

bool sm90_gemm_built(Operand op) {
  switch (op) {
#ifndef FUSEDMOE_SKIP_GPU_BF16
    case Operand::BF16: return true;
#endif
#ifndef FUSEDMOE_SKIP_GPU_FP16
    case Operand::FP16: return true;
#endif
#ifndef FUSEDMOE_SKIP_GPU_FP8
    case Operand::FP8: return true;
#endif
    default: return false;
  }
}

bool sm90_gemm_shape_ok(Operand op, int64_t n, int64_t k, const void* b) {
  if (op == Operand::FP32) return false;
  const int64_t elem = op == Operand::FP8 ? 1 : 2;
  // TMA: every row (A, B: k elements; D: n fp32) and every base address 16-byte aligned.
  // The per-expert bases (rows * k, g * n * k elements) then stay aligned too.
  return (k * elem) % 16 == 0 && (n * 4) % 16 == 0 && reinterpret_cast<uintptr_t>(b) % 16 == 0 && n < INT32_MAX &&
         k < INT32_MAX;
}

size_t grouped_gemm_workspace_bytes(Operand op, GemmPath path, int groups, int sm_count) {
  if (path == GemmPath::SIMT) return 0;
  if (path == GemmPath::SM90_FP8_BLOCK)
    return std::max({sm90_grouped_gemm_fp8_blockwise_workspace(groups, sm_count),
                     sm90_grouped_gemm_fp8_blockwise_d16_workspace(groups, sm_count),
                     sm90_grouped_gemm_fp8_blockwise_act_workspace(groups, sm_count)});
  switch (op) {
#ifndef FUSEDMOE_SKIP_GPU_BF16
    case Operand::BF16:
      return std::max({sm90_grouped_gemm_bf16_workspace(groups, sm_count),
                       sm90_grouped_gemm_bf16_d16_workspace(groups, sm_count),
                       sm90_grouped_gemm_bf16_act_workspace(groups, sm_count)});
#endif
#ifndef FUSEDMOE_SKIP_GPU_FP16
    case Operand::FP16: return sm90_grouped_gemm_fp16_workspace(groups, sm_count);
#endif
#ifndef FUSEDMOE_SKIP_GPU_FP8
    case Operand::FP8:
      return std::max({sm90_grouped_gemm_fp8_workspace(groups, sm_count),
                       sm90_grouped_gemm_fp8_d16_workspace(groups, sm_count),
                       sm90_grouped_gemm_fp8_d16_dequant_workspace(groups, sm_count),
                       sm90_grouped_gemm_fp8_act_workspace(groups, sm_count),
                       sm90_grouped_gemm_fp8_act_channel_workspace(groups, sm_count)});
#endif
    default: throw Error("grouped GEMM: no SM90 instance for this operand type in this build");
  }
}

bool sm90_bf16_d_applies(const GroupedGemmArgs& a, GemmPath path) {
  if (stream_gemm_takes(a, path)) return a.n % 8 == 0;  // the few-rows range: the stream GEMM's bf16 D
  const bool family = path == GemmPath::SM90_FP8_BLOCK
                          ? sm90_fp8_blockwise_built()
                          : path == GemmPath::SM90_TMA && (a.op == Operand::BF16 || a.op == Operand::FP8) &&
                                sm90_gemm_built(a.op);
  return family && a.n % 8 == 0 && !small_m_takes(a, path) && !sm90_use_small_config(a);
}

bool sm90_dequant_d_applies(const GroupedGemmArgs& a, GemmPath path) {
  return path == GemmPath::SM90_TMA && a.op == Operand::FP8 && sm90_bf16_d_applies(a, path);
}

bool gemm2_dequant_switched_off() {
  static const bool off = env_switch_is_zero("FUSEDMOE_GEMM2_DEQUANT");
  return off;
}

bool sibling_sync_on() {
  static const bool on = !env_switch_is_zero("FUSEDMOE_SIBLING_SYNC");
  return on;
}

bool sm90_gemm1_act_applies(const GroupedGemmArgs& g, GemmPath path, const ActivationParams& ap) {
  if (path != GemmPath::SM90_TMA || !(g.op == Operand::BF16 || g.op == Operand::FP8) || !sm90_gemm_built(g.op))
    return false;
  if (g.d_dtype != DType::F32 || small_m_takes(g, path) || sm90_use_small_config(g)) return false;
  if (ap.act == Activation::RELU2 || g.n != 2 * ap.N || ap.op != g.op) return false;
  // Halves: PairedHalvesMainloop reads 128 rows of each half per tile with a row stride of half a
  // row (a 16-byte multiple for TMA); the epilogue stores two adjacent outputs (N even).
  const int64_t row_bytes = g.k * (g.op == Operand::FP8 ? 1 : 2);
  if (!ap.interleaved && (ap.N % 2 != 0 || row_bytes % 32 != 0)) return false;
  if (ap.act_dtype != DType::BF16) return false;  // the epilogue rounds to bf16 only (fp16 / fp32 hidden: unfused)
  if (ap.dq.kind != Dequant::NONE && ap.dq.kind != Dequant::TENSOR) return false;
  if (g.op == Operand::FP8) return ap.quant == Fp8Quant::TENSOR_STATIC;
  return ap.quant == Fp8Quant::NONE;
}

namespace {
std::atomic<int64_t> g_fused_gemm1_launches[static_cast<int>(FusedGemm1::kCount)];
std::atomic<int64_t> g_gathered_gemm1_launches{0};
}  // namespace

ActivationParams bf16_rows_output(const ActivationParams& ap, void* act_bf16) {
  ActivationParams e = ap;
  e.out = act_bf16;
  e.quant = Fp8Quant::NONE;
  e.op = Operand::BF16;
  return e;
}

void count_fused_gemm1_launch(FusedGemm1 kind) {
  g_fused_gemm1_launches[static_cast<int>(kind)].fetch_add(1, std::memory_order_relaxed);
}
int64_t fused_gemm1_launches(FusedGemm1 kind) {
  return g_fused_gemm1_launches[static_cast<int>(kind)].load(std::memory_order_relaxed);
}
int64_t gathered_gemm1_launches() { return g_gathered_gemm1_launches.load(std::memory_order_relaxed); }
void count_gathered_gemm1_launch() { g_gathered_gemm1_launches.fetch_add(1, std::memory_order_relaxed); }

void run_grouped_gemm1_act(const GroupedGemmArgs& g, const ActivationParams& ap, cudaStream_t stream) {
  if (!sm90_gemm1_act_applies(g, GemmPath::SM90_TMA, ap))
    throw Error("grouped GEMM: GEMM1 + activation called for a problem it does not take (sm90_gemm1_act_applies)");
  count_fused_gemm1_launch(FusedGemm1::BF16_OR_FP8_TENSOR);
  if (g.gather_x != nullptr) count_gathered_gemm1_launch();
  switch (g.op) {
#ifndef FUSEDMOE_SKIP_GPU_BF16
    case Operand::BF16: sm90_grouped_gemm_bf16_act(g, ap, stream); return;
#endif
#ifndef FUSEDMOE_SKIP_GPU_FP8
    case Operand::FP8: sm90_grouped_gemm_fp8_act(g, ap, stream); return;
#endif
    default: throw Error("grouped GEMM: no GEMM1 + activation instance for this operand type in this build");
  }
}

namespace {
std::atomic<int>& gather_mode_flag() {
  static std::atomic<int> flag{[] {
    const char* e = std::getenv("FUSEDMOE_GEMM1_GATHER");
    const std::string v = e != nullptr ? e : "";
    return static_cast<int>(v == "0" ? Gemm1Gather::OFF : v == "1" ? Gemm1Gather::ON : Gemm1Gather::AUTO);
  }()};
  return flag;
}
}  // namespace

namespace {
std::atomic<int64_t>& tall_min_row_bytes() {
  static std::atomic<int64_t> v{[] {
    const char* e = std::getenv("FUSEDMOE_STREAM_TALL");
    if (e == nullptr || *e == '\0') return kStreamTallMinRowBytes;
    const long long b = std::atoll(e);
    return b <= 0 ? INT64_MAX : static_cast<int64_t>(b);
  }()};
  return v;
}
std::atomic<int64_t>& tall_max_rows() {
  static std::atomic<int64_t> v{[] {
    const char* e = std::getenv("FUSEDMOE_STREAM_TALL_MAX_ROWS");
    const long long r = e != nullptr ? std::atoll(e) : 0;
    return r > 0 ? static_cast<int64_t>(r) : kStreamTallMaxRowsPerGroup;
  }()};
  return v;
}
std::atomic<int64_t>& tall_min_n() {
  static std::atomic<int64_t> v{kStreamTallMinN};
  return v;
}
}  // namespace

StreamTallRule stream_tall_rule() {
  return {tall_min_row_bytes().load(std::memory_order_relaxed), tall_min_n().load(std::memory_order_relaxed),
          tall_max_rows().load(std::memory_order_relaxed)};
}
void set_stream_tall_rule(StreamTallRule r) {
  tall_min_row_bytes().store(r.min_row_bytes);
  tall_min_n().store(r.min_n);
  tall_max_rows().store(r.max_rows_per_group);
}

Gemm1Gather gemm1_gather_mode() { return static_cast<Gemm1Gather>(gather_mode_flag().load()); }
void set_gemm1_gather_mode(Gemm1Gather mode) { gather_mode_flag().store(static_cast<int>(mode)); }

bool sm90_gemm1_gather_applies(const GroupedGemmArgs& g, GemmPath path, const ActivationParams& ap, const void* x,
                               int64_t tokens) {
  const Gemm1Gather mode = gemm1_gather_mode();
  if (mode == Gemm1Gather::OFF || !(sm90_gemm1_act_applies(g, path, ap) || sm90_gemm1_channel_act_applies(g, path, ap)))
    return false;
  if (g.op != Operand::BF16 && g.op != Operand::FP8) return false;
  // 16-byte copies: a 16-byte aligned base, rows a multiple of 16 bytes apart; the mainloop keeps
  // each row's byte offset in 32 bits.
  const int64_t row_bytes = g.k * (g.op == Operand::FP8 ? 1 : 2);
  if (x == nullptr || reinterpret_cast<uintptr_t>(x) % 16 != 0 || row_bytes % 16 != 0 || tokens <= 0 ||
      tokens * row_bytes > (int64_t{1} << 32))
    return false;
  if (mode == Gemm1Gather::ON) return true;
  // AUTO: the gather's copies go through the LSU at ~16 KB per ~1800 cycles per SM (H100), so the
  // gathered GEMM1 is slower than the TMA loads of the permuted operand wherever measured; what it
  // saves is the permute's write and GEMM1's re-read of topk copies of every row. A row is copied
  // once per column tile, so that pays only with few column tiles (n <= 1024: 4 tiles of 256),
  // over a long k loop (a tile's first copies wait on its row lookups) and at most 128 rows per
  // expert on average (the measured range). Same-binary A/B, H100
  // (bench/results/2026-11-27-h100-gemm1-cpasync): DeepSeek-V3 TP8 at 4096 tokens (n = 512,
  // K = 7168) 0.85 / 0.92x the layer time (bf16 / fp8-tensor); TP1 (n = 4096) 1.05 / 1.14x,
  // Mixtral (n = 28672) 1.09-1.26x, Qwen3-30B-A3B (n = 1536, K = 2048) 0.96-1.08x.
  return g.n <= 1024 && g.k >= 4096 && g.max_rows <= int64_t{128} * g.groups;
}

bool sm90_gemm1_channel_act_applies(const GroupedGemmArgs& g, GemmPath path, const ActivationParams& ap) {
  if (path != GemmPath::SM90_TMA || g.op != Operand::FP8 || !sm90_gemm_built(g.op)) return false;
  if (g.d_dtype != DType::F32 || small_m_takes(g, path) || sm90_use_small_config(g)) return false;
  if (ap.act == Activation::RELU2 || g.n != 2 * ap.N || ap.op != g.op) return false;
  const int64_t row_bytes = g.k;  // e4m3
  if (!ap.interleaved && (ap.N % 2 != 0 || row_bytes % 32 != 0)) return false;
  // bf16 activations; per-channel dequant; per-row fp8 of the bf16 rows (8-wide vectors).
  return ap.act_dtype == DType::BF16 && ap.dq.kind == Dequant::CHANNEL && ap.quant == Fp8Quant::ROW && ap.N % 8 == 0;
}

void run_grouped_gemm1_channel_act(const GroupedGemmArgs& g, const ActivationParams& ap, void* act_bf16,
                                   cudaStream_t stream) {
  if (!sm90_gemm1_channel_act_applies(g, GemmPath::SM90_TMA, ap))
    throw Error("grouped GEMM: fp8-channel GEMM1 + activation called for a problem it does not take "
                "(sm90_gemm1_channel_act_applies)");
#ifndef FUSEDMOE_SKIP_GPU_FP8
  count_fused_gemm1_launch(FusedGemm1::FP8_CHANNEL);
  if (g.gather_x != nullptr) count_gathered_gemm1_launch();
  sm90_grouped_gemm_fp8_act_channel(g, bf16_rows_output(ap, act_bf16), stream);
#else
  (void)act_bf16;
  (void)stream;
  throw Error("grouped GEMM: the fp8 instances were left out of this build");
#endif
}

bool sm90_gemm1_block_act_applies(const GroupedGemmArgs& g, GemmPath path, const ActivationParams& ap) {
  if (path != GemmPath::SM90_FP8_BLOCK || !sm90_fp8_blockwise_built() || g.op != Operand::FP8) return false;
  // Where run_grouped_gemm would run the large blockwise instance.
  if (g.d_dtype != DType::F32 || small_m_takes(g, path) || stream_gemm_takes(g, path)) return false;
  if (g.b_scale_tiles == nullptr || g.a_scale == nullptr || g.b_scale == nullptr) return false;
  if (ap.act == Activation::RELU2 || g.n != 2 * ap.N || ap.quant != Fp8Quant::BLOCK) return false;
  // Halves rows only: interleaved ones store one output per store and measured 1.04-1.10x the
  // unfused stages at 4096 tokens (H100, bench/results/2026-11-26-h100-fp8-block-gemm1-act).
  if (ap.interleaved) return false;
  // Halves at most 32 MB apart (as the stream GEMM's fused halves, kActHalvesMaxBytes): Mixtral's
  // (59 MB) fused GEMM1 was 1.06-1.20x the unfused one at 256-4096 tokens and the layer 1.02-1.03x;
  // Qwen3-30B-A3B (1.5 MB) 0.95-0.97x, DeepSeek-V3 TP8 / TP1 at 4096 tokens 0.98 / 0.99x.
  constexpr int64_t kBlockActHalvesMaxBytes = int64_t{32} << 20;
  if (g.n / 2 * g.k > kBlockActHalvesMaxBytes) return false;
  // The epilogue rounds to bf16 (the activation dtype); fp8-block has no dequant outside the
  // mainloop; whole 128-wide groups for the quantiser of the bf16 rows; K tiles of one scale block.
  return ap.act_dtype == DType::BF16 && ap.dq.kind == Dequant::NONE && ap.N % 128 == 0 && g.k % 128 == 0;
}

void run_grouped_gemm1_block_act(const GroupedGemmArgs& g, const ActivationParams& ap, void* act_bf16,
                                 cudaStream_t stream) {
  if (!sm90_gemm1_block_act_applies(g, GemmPath::SM90_FP8_BLOCK, ap))
    throw Error("grouped GEMM: fp8-block GEMM1 + activation called for a problem it does not take "
                "(sm90_gemm1_block_act_applies)");
  count_fused_gemm1_launch(FusedGemm1::FP8_BLOCK);
  sm90_grouped_gemm_fp8_blockwise_act(g, bf16_rows_output(ap, act_bf16), stream);
}

void run_grouped_gemm(const GroupedGemmArgs& args, GemmPath path, cudaStream_t stream) {
  if (args.d_dtype != DType::F32 && !(args.d_dtype == DType::BF16 && sm90_bf16_d_applies(args, path)))
    throw Error(std::string("grouped GEMM: d_dtype ") + dtype_name(args.d_dtype) + " on path " + gemm_path_name(path) +
                " (only the large-M SM90 bf16 / fp8 instances write a bf16 D; others fp32)");
  if (args.gather_x != nullptr)
    throw Error("grouped GEMM: gather_x is taken by the fused GEMM1 + activation instances only "
                "(sm90_gemm1_gather_applies)");
  if (args.d_col_scale != nullptr && !(args.d_dtype == DType::BF16 && sm90_dequant_d_applies(args, path)))
    throw Error(std::string("grouped GEMM: the channel scales in the epilogue (d_col_scale) asked on path ") +
                gemm_path_name(path) + " with d_dtype " + dtype_name(args.d_dtype) +
                " (only fp8 operands with a bf16 D on SM90_TMA: sm90_dequant_d_applies)");
  if (path == GemmPath::SIMT) {
    simt_grouped_gemm(args, stream);
    return;
  }
  if (path == GemmPath::SM90_FP8_BLOCK) {
    // Decode-like calls stream the weights on the small-M path, as the other fp8 formats.
    if (small_m_takes(args, path)) small_m_grouped_gemm(args, stream, true);
    else if (stream_gemm_takes(args, path)) stream_grouped_gemm(args, path, stream);
    else if (args.d_dtype == DType::BF16) sm90_grouped_gemm_fp8_blockwise_d16(args, stream);
    else sm90_grouped_gemm_fp8_blockwise(args, stream);
    return;
  }
  if (small_m_takes(args, path)) {
    small_m_grouped_gemm(args, stream);
    return;
  }
  if (stream_gemm_takes(args, path)) {
    stream_grouped_gemm(args, path, stream);
    return;
  }
  switch (args.op) {
#ifndef FUSEDMOE_SKIP_GPU_BF16
    case Operand::BF16:
      if (args.d_dtype == DType::BF16) sm90_grouped_gemm_bf16_d16(args, stream);
      else sm90_grouped_gemm_bf16(args, stream);
      return;
#endif
#ifndef FUSEDMOE_SKIP_GPU_FP16
    case Operand::FP16: sm90_grouped_gemm_fp16(args, stream); return;
#endif
#ifndef FUSEDMOE_SKIP_GPU_FP8
    case Operand::FP8:
      if (args.d_col_scale != nullptr) sm90_grouped_gemm_fp8_d16_dequant(args, stream);
      else if (args.d_dtype == DType::BF16) sm90_grouped_gemm_fp8_d16(args, stream);
      else sm90_grouped_gemm_fp8(args, stream);
      return;
#endif
    default: throw Error("grouped GEMM: no SM90 instance for this operand type in this build");
  }
}

}  // namespace fusedmoe::cuda
