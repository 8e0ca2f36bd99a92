// The portable CPU backend and the float64 oracle (same code, accumulator type T).
// Pipeline: slots -> per-expert row lists (stable by slot index t*topk+k) -> quantise GEMM1
// operand -> GEMM1 (+bias) -> activation -> round to the activation dtype -> quantise GEMM2
// operand -> GEMM2 (+bias) -> weighted top-k sum in slot order. Every output element is
// computed by one task in a fixed order, so results do not depend on the thread count.
#include <chrono>
#include <cstring>
#include <vector>

#include "core/backend.hpp"
#include "cpu/activation.hpp"
#include "cpu/operand_quant.hpp"
#include "cpu/parallel.hpp"
#include "cpu/weight_rows.hpp"
#include "fusedmoe/codecs.hpp"
#include "fusedmoe/quantize.hpp"

namespace fusedmoe::detail {
namespace {

using cpu::WeightMatrix;

float load_act(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::F32: return t.ptr<const float>()[i];
    case DType::F16: return fp16_bits_to_float(t.ptr<const uint16_t>()[i]);
    case DType::BF16: return bf16_bits_to_float(t.ptr<const uint16_t>()[i]);
    default: return 0.0f;  // validated before
  }
}

void store_act(const TensorView& t, int64_t i, double v) {
  const float f = static_cast<float>(v);
  switch (t.dtype) {
    case DType::F32: t.ptr<float>()[i] = f; break;
    case DType::F16: t.ptr<uint16_t>()[i] = float_to_fp16_bits(f); break;
    case DType::BF16: t.ptr<uint16_t>()[i] = float_to_bf16_bits(f); break;
    default: break;
  }
}

// Rounds to the activation dtype (= the dtype of hidden_states).
float round_to(DType d, double v) {
  const float f = static_cast<float>(v);
  if (d == DType::BF16) return round_bf16(f);
  if (d == DType::F16) return round_fp16(f);
  return f;
}

template <typename T>
T dot(const T* a, const T* b, int64_t n) {
  // Eight independent partial sums in a fixed order: vectorisable and deterministic.
  T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[k + l] * b[k + l];
  T tail = 0;
  for (; k < n; ++k) tail += a[k] * b[k];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

class CpuBackend final : public BackendImpl {
 public:
  CpuBackend(const LayerConfig& c, const LayerWeights& w, const LayerShape& s, const LayerOptions& o)
      : config_(c), weights_(w), shape_(s), threads_(cpu::resolve_threads(o.cpu_threads)),
        oracle_(o.cpu_precision == CpuPrecision::ORACLE_FP64),
        w13_(WeightMatrix::w13(c, w, s.w13_rows, s.hidden)),
        w2_(WeightMatrix::w2(c, w, s.hidden, s.inter)) {}

  size_t workspace_size(int64_t, int64_t) const override { return 0; }

  Support can_implement(const Problem&) const override { return {}; }

  void run(const RunArgs& args, const Problem& p) const override { run_timed(args, p); }

  StageTimes run_timed(const RunArgs& args, const Problem& p) const override {
    return oracle_ ? run_t<double>(args, p) : run_t<float>(args, p);
  }

 private:
  using Clock = std::chrono::steady_clock;
  static double ms_since(Clock::time_point& t0) {
    const auto t1 = Clock::now();
    const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    t0 = t1;
    return ms;
  }

  // GEMM over the experts: out[r][j] = dot(in[r], W[e][j]) (+ bias[e][j]) for the rows r of
  // each expert. Tasks = (expert, block of 16 output columns): each dequantises its weight
  // rows once and reuses them for all of the expert's rows.
  template <typename T>
  void grouped_gemm(const WeightMatrix& W, const float* bias, const std::vector<int64_t>& offsets,
                    const std::vector<int64_t>& expert_of_block, const std::vector<int64_t>& block_col,
                    const T* in, int64_t in_cols, T* out, int64_t out_cols) const {
    constexpr int64_t kCols = 16;
    (void)expert_of_block;
    cpu::parallel_for(static_cast<int64_t>(block_col.size()), threads_, [&](int64_t task) {
      const int64_t e = expert_of_block[task];
      const int64_t j0 = block_col[task];
      const int64_t j1 = std::min(j0 + kCols, out_cols);
      thread_local std::vector<T> wbuf;
      wbuf.resize(static_cast<size_t>(kCols * in_cols));
      for (int64_t j = j0; j < j1; ++j) W.dequant_row<T>(e, j, wbuf.data() + (j - j0) * in_cols);
      for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r) {
        const T* a = in + r * in_cols;
        for (int64_t j = j0; j < j1; ++j) {
          T v = dot(a, wbuf.data() + (j - j0) * in_cols, in_cols);
          if (bias) v += T(bias[e * out_cols + j]);
          out[r * out_cols + j] = v;
        }
      }
    });
  }

  template <typename T>
  StageTimes run_t(const RunArgs& args, const Problem& p) const {
    StageTimes times;
    auto t0 = Clock::now();
    const auto start = t0;
    const int64_t M = p.num_tokens, topk = p.topk, K = p.hidden, N = p.inter, E = p.num_experts;
    const int64_t R = shape_.w13_rows;
    const DType act_dtype = args.hidden_states.dtype;
    const int32_t* ids = args.topk_ids.ptr<const int32_t>();
    const float* tw = args.topk_weights.ptr<const float>();
    const int32_t* emap = args.expert_map.present() ? args.expert_map.ptr<const int32_t>() : nullptr;

    // ---- permute: local expert of each slot, rows grouped by expert, stable by slot ----
    const int64_t slots = M * topk;
    std::vector<int64_t> slot_expert(static_cast<size_t>(slots), -1);
    std::vector<int64_t> offsets(static_cast<size_t>(E + 1), 0);
    for (int64_t i = 0; i < slots; ++i) {
      const int64_t g = ids[i];
      int64_t e = -1;
      if (g >= 0 && g < p.num_global_experts) e = emap ? emap[g] : g;
      if (e < 0 || e >= E) e = -1;  // unmapped (or a map entry outside the local range)
      slot_expert[i] = e;
      if (e >= 0) ++offsets[e + 1];
    }
    for (int64_t e = 0; e < E; ++e) offsets[e + 1] += offsets[e];
    const int64_t rows = offsets[E];
    std::vector<int64_t> row_slot(static_cast<size_t>(rows)), slot_row(static_cast<size_t>(slots), -1);
    {
      std::vector<int64_t> fill(offsets.begin(), offsets.end() - 1);
      for (int64_t i = 0; i < slots; ++i) {
        if (slot_expert[i] < 0) continue;
        const int64_t r = fill[slot_expert[i]]++;
        row_slot[r] = i;
        slot_row[i] = r;
      }
    }
    std::vector<int64_t> row_expert(static_cast<size_t>(rows));
    for (int64_t e = 0; e < E; ++e)
      for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r) row_expert[r] = e;

    // GEMM1 operand rows (before quantisation), in float: x_t, or w_tk * x_t on input.
    std::vector<float> x_rows(static_cast<size_t>(rows * K));
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = row_slot[r], t = i / topk;
      const T scale = args.apply_router_weight_on_input ? T(tw[i]) : T(1);
      for (int64_t k = 0; k < K; ++k) {
        const T v = T(load_act(args.hidden_states, t * K + k)) * scale;
        x_rows[r * K + k] = args.apply_router_weight_on_input ? round_to(act_dtype, v) : static_cast<float>(v);
      }
    }
    cpu::OperandQuant q1{&config_, 1.0f, nullptr};
    if (config_.format == Format::FP8_TENSOR) {
      if (weights_.w13_input_scale.present()) {
        q1.tensor_scale = weights_.w13_input_scale.ptr<const float>()[0];
      } else if (args.apply_router_weight_on_input) {
        q1.tensor_scale = fp8_tensor_scale(x_rows.data(), rows * K);
      } else {
        std::vector<float> all(static_cast<size_t>(M * K));
        for (int64_t i = 0; i < M * K; ++i) all[i] = load_act(args.hidden_states, i);
        q1.tensor_scale = fp8_tensor_scale(all.data(), M * K);
      }
    }
    if (weights_.w13_input_scale.present() && config_.format == Format::NVFP4)
      q1.nvfp4_input_scale = weights_.w13_input_scale.ptr<const float>();
    std::vector<T> a1(static_cast<size_t>(rows * K));
    cpu::parallel_for(rows, threads_, [&](int64_t r) {
      cpu::quantize_operand_row<T>(q1, x_rows.data() + r * K, K, row_expert[r], a1.data() + r * K);
    });
    x_rows.clear();
    x_rows.shrink_to_fit();

    // Column blocks of the two GEMMs, over the experts that have rows.
    auto make_blocks = [&](int64_t cols, std::vector<int64_t>& be, std::vector<int64_t>& bc) {
      for (int64_t e = 0; e < E; ++e) {
        if (offsets[e + 1] == offsets[e]) continue;
        for (int64_t j = 0; j < cols; j += 16) {
          be.push_back(e);
          bc.push_back(j);
        }
      }
    };
    times.permute_ms = ms_since(t0);

    // ---- GEMM1 ----
    std::vector<int64_t> be1, bc1;
    make_blocks(R, be1, bc1);
    std::vector<T> h(static_cast<size_t>(rows * R));
    const float* b1 = weights_.w13_bias.present() ? weights_.w13_bias.ptr<const float>() : nullptr;
    grouped_gemm<T>(w13_, b1, offsets, be1, bc1, a1.data(), K, h.data(), R);
    a1.clear();
    a1.shrink_to_fit();
    times.gemm1_ms = ms_since(t0);

    // ---- activation, rounded to the activation dtype, then GEMM2's operand ----
    std::vector<float> act(static_cast<size_t>(rows * N));
    cpu::parallel_for(rows, threads_, [&](int64_t r) {
      thread_local std::vector<T> tmp;
      tmp.resize(static_cast<size_t>(N));
      cpu::apply_activation<T>(config_, h.data() + r * R, N, tmp.data());
      for (int64_t n = 0; n < N; ++n) act[r * N + n] = round_to(act_dtype, tmp[n]);
    });
    h.clear();
    h.shrink_to_fit();
    cpu::OperandQuant q2{&config_, 1.0f, nullptr};
    if (config_.format == Format::FP8_TENSOR)
      q2.tensor_scale = weights_.w2_input_scale.present() ? weights_.w2_input_scale.ptr<const float>()[0]
                                                          : fp8_tensor_scale(act.data(), rows * N);
    if (weights_.w2_input_scale.present() && config_.format == Format::NVFP4)
      q2.nvfp4_input_scale = weights_.w2_input_scale.ptr<const float>();
    std::vector<T> a2(static_cast<size_t>(rows * N));
    cpu::parallel_for(rows, threads_, [&](int64_t r) {
      cpu::quantize_operand_row<T>(q2, act.data() + r * N, N, row_expert[r], a2.data() + r * N);
    });
    act.clear();
    act.shrink_to_fit();
    times.activation_ms = ms_since(t0);

    // ---- GEMM2 ----
    std::vector<int64_t> be2, bc2;
    make_blocks(K, be2, bc2);
    std::vector<T> y(static_cast<size_t>(rows * K));
    const float* b2 = weights_.w2_bias.present() ? weights_.w2_bias.ptr<const float>() : nullptr;
    grouped_gemm<T>(w2_, b2, offsets, be2, bc2, a2.data(), N, y.data(), K);
    times.gemm2_ms = ms_since(t0);

    // ---- finalize: out_t = sum_k w_tk * y_tk in slot order ----
    cpu::parallel_for(M, threads_, [&](int64_t t) {
      for (int64_t k = 0; k < K; ++k) {
        T acc = 0;
        for (int64_t j = 0; j < topk; ++j) {
          const int64_t r = slot_row[t * topk + j];
          if (r < 0) continue;
          const T w = args.apply_router_weight_on_input ? T(1) : T(tw[t * topk + j]);
          acc += w * y[r * K + k];
        }
        store_act(args.output, t * K + k, static_cast<double>(acc));
      }
    });
    times.finalize_ms = ms_since(t0);
    times.total_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    return times;
  }

  LayerConfig config_;
  LayerWeights weights_;
  LayerShape shape_;
  int threads_;
  bool oracle_;
  WeightMatrix w13_, w2_;
};

}  // namespace

std::unique_ptr<BackendImpl> make_cpu_backend(const LayerConfig& c, const LayerWeights& w, const LayerShape& s,
                                              const LayerOptions& o) {
  return std::make_unique<CpuBackend>(c, w, s, o);
}

}  // namespace fusedmoe::detail
