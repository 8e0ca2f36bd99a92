// The portable CPU backend and the float64 oracle (same code, accumulator type T).
// Pipeline: slots -> per-expert row lists (stable by slot index t*topk+k) -> quantise GEMM1
// operand -> GEMM1 (+bias) -> activation -> round to the activation dtype -> quantise GEMM2
// operand -> GEMM2 (+bias) -> weighted top-k sum in slot order. Every output element is
// computed by one task in a fixed order, so results do not depend on the thread count.
#include <algorithm>
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
    Job job;
    job.x = args.hidden_states;
    job.x_scale = args.hidden_states_scale;
    job.out = args.output;
    job.M = p.num_tokens;
    job.topk = p.topk;
    job.weights = args.topk_weights.ptr<const float>();
    job.on_input = args.apply_router_weight_on_input;
    job.amax_over_rows = args.apply_router_weight_on_input;
    const int64_t slots = p.num_tokens * p.topk;
    const int32_t* ids = args.topk_ids.ptr<const int32_t>();
    const int32_t* emap = args.expert_map.present() ? args.expert_map.ptr<const int32_t>() : nullptr;
    job.slot_expert.assign(static_cast<size_t>(slots), -1);
    for (int64_t i = 0; i < slots; ++i) {
      const int64_t g = ids[i];
      int64_t e = -1;
      if (g >= 0 && g < p.num_global_experts) e = emap ? emap[g] : g;
      if (e < 0 || e >= p.num_experts) e = -1;  // unmapped (or a map entry outside the local range)
      job.slot_expert[i] = e;
    }
    return oracle_ ? run_t<double>(job) : run_t<float>(job);
  }

  size_t masked_workspace_size(int64_t) const override { return 0; }

  Support can_implement_masked(const MaskedProblem&) const override { return {}; }

  // The masked layout is the contiguous pipeline over E*T "tokens" with top-1 routing to the
  // expert of their block (rows past the count select nothing, so finalize writes zeros) and
  // weight 1; the fp8-tensor dynamic amax runs over the valid rows only.
  void run_masked(const MaskedArgs& args, const MaskedProblem& p) const override {
    const int64_t E = p.num_experts, T = p.max_tokens_per_expert;
    Job job;
    job.x = args.hidden_states;
    job.x_scale = args.hidden_states_scale;
    job.out = args.output;
    job.M = E * T;
    job.topk = 1;
    job.weights = nullptr;
    job.on_input = false;
    job.amax_over_rows = true;
    job.slot_expert.assign(static_cast<size_t>(E * T), -1);
    const int32_t* counts = args.expert_num_tokens.ptr<const int32_t>();
    for (int64_t e = 0; e < E; ++e) {
      const int64_t n = std::min<int64_t>(std::max<int64_t>(counts[e], 0), T);
      for (int64_t t = 0; t < n; ++t) job.slot_expert[e * T + t] = e;
    }
    if (oracle_) run_t<double>(job);
    else run_t<float>(job);
  }

  void warmup(int64_t, int64_t, void*) const override {}  // nothing is lazy on the CPU

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

  // One call of the pipeline: M "tokens" of hidden states, topk slots each, with the local expert
  // of every slot already resolved (run() and run_masked() build it).
  struct Job {
    TensorView x;        // [M, K] F32/F16/BF16, or F8_E4M3 codes (pre-quantised fp8-block)
    TensorView x_scale;  // pre-quantised: F32 [M, ceil(K/128)]
    TensorView out;      // [M, K]; its dtype is the activation dtype
    int64_t M = 0, topk = 1;
    std::vector<int64_t> slot_expert;  // [M * topk] local expert or -1
    const float* weights = nullptr;    // [M * topk] router weights; nullptr = 1
    bool on_input = false;             // apply the router weight to GEMM1's input
    bool amax_over_rows = false;       // fp8-tensor dynamic amax over the selected rows only
  };

  template <typename T>
  StageTimes run_t(const Job& job) const {
    StageTimes times;
    auto t0 = Clock::now();
    const auto start = t0;
    const int64_t M = job.M, topk = job.topk, K = shape_.hidden, N = shape_.inter, E = shape_.num_experts;
    const int64_t R = shape_.w13_rows;
    const DType act_dtype = job.out.dtype;  // == hidden dtype unless pre-quantised
    const bool prequantized = job.x.dtype == DType::F8_E4M3;
    const float* tw = job.weights;
    auto weight = [&](int64_t i) { return tw ? tw[i] : 1.0f; };

    // ---- permute: local expert of each slot, rows grouped by expert, stable by slot ----
    const int64_t slots = M * topk;
    const std::vector<int64_t>& slot_expert = job.slot_expert;
    std::vector<int64_t> offsets(static_cast<size_t>(E + 1), 0);
    for (int64_t i = 0; i < slots; ++i)
      if (slot_expert[i] >= 0) ++offsets[slot_expert[i] + 1];
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

    std::vector<T> a1(static_cast<size_t>(rows * K));
    if (prequantized) {
      // Pre-quantised fp8-block inputs: the operand is q * s exactly (no re-quantisation).
      const uint8_t* q = job.x.ptr<const uint8_t>();
      const float* qs = job.x_scale.ptr<const float>();
      const int64_t groups = (K + kFp8BlockSize - 1) / kFp8BlockSize;
      cpu::parallel_for(rows, threads_, [&](int64_t r) {
        const int64_t t = row_slot[r] / topk;
        for (int64_t k = 0; k < K; ++k)
          a1[r * K + k] = T(e4m3_to_float(q[t * K + k])) * T(qs[t * groups + k / kFp8BlockSize]);
      });
    } else {
      // GEMM1 operand rows (before quantisation), in float: x_t, or w_tk * x_t on input.
      std::vector<float> x_rows(static_cast<size_t>(rows * K));
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = row_slot[r], t = i / topk;
        const T scale = job.on_input ? T(weight(i)) : T(1);
        for (int64_t k = 0; k < K; ++k) {
          const T v = T(load_act(job.x, t * K + k)) * scale;
          x_rows[r * K + k] = job.on_input ? round_to(act_dtype, v) : static_cast<float>(v);
        }
      }
      cpu::OperandQuant q1{&config_, 1.0f, nullptr};
      if (config_.format == Format::FP8_TENSOR) {
        if (weights_.w13_input_scale.present()) {
          q1.tensor_scale = weights_.w13_input_scale.ptr<const float>()[0];
        } else if (job.amax_over_rows) {
          q1.tensor_scale = fp8_tensor_scale(x_rows.data(), rows * K);
        } else {
          std::vector<float> all(static_cast<size_t>(M * K));
          for (int64_t i = 0; i < M * K; ++i) all[i] = load_act(job.x, i);
          q1.tensor_scale = fp8_tensor_scale(all.data(), M * K);
        }
      }
      if (weights_.w13_input_scale.present() && config_.format == Format::NVFP4)
        q1.nvfp4_input_scale = weights_.w13_input_scale.ptr<const float>();
      cpu::parallel_for(rows, threads_, [&](int64_t r) {
        cpu::quantize_operand_row<T>(q1, x_rows.data() + r * K, K, row_expert[r], a1.data() + r * K);
      });
    }

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
          const T w = job.on_input ? T(1) : T(weight(t * topk + j));
          acc += w * y[r * K + k];
        }
        store_act(job.out, t * K + k, static_cast<double>(acc));
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
