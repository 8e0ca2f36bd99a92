#pragma once
// A GEMM1 + gated-activation problem on the GPU, shared by the tests of the kernels that fuse the
// activation into GEMM1 (test_small_m_activation_gpu.cpp, test_stream_gemm_act_gpu.cpp): experts
// with the given row counts (those without rows hold NaN weights: never read), random operands of
// the case's type, a bias and a weight scale per expert, GEMM1's arguments (D = h) and the
// activation's parameters: bf16 / fp16 conversion, or for fp8 the tensor dequant (a-scale 0.8 x
// the expert's weight scale) and static quantisation (scale 0.02). The tests compare the fused
// kernel's bytes of p.out with the unfused pair's (GEMM1 into h, then the activation kernel).
#include <cuda_runtime.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cuda/grouped_gemm.hpp"
#include "cuda/moe_kernels.hpp"
#include "gpu/gpu_test_util.hpp"
#include "gpu/operand_util.hpp"

namespace fusedmoe::gputest {

struct ActCase {
  Operand op;
  Activation act;
  bool interleaved;
  GateUpOrder order;
  bool bias;
  int64_t N, K;  // N: intermediate (activation outputs), K: hidden (GEMM1 k)
};

inline std::string act_case_name(const ActCase& c) {
  const char* act = c.act == Activation::SILU ? "silu" : c.act == Activation::GELU ? "gelu"
                    : c.act == Activation::GELU_TANH ? "gelutanh" : "swigluoai";
  return std::string(c.op == Operand::BF16 ? "bf16" : c.op == Operand::FP16 ? "fp16" : "fp8") + "_" + act +
         (c.interleaved ? "_interleaved" : "") + (c.order == GateUpOrder::UP_GATE ? "_upgate" : "") +
         (c.bias ? "_bias" : "") + "_N" + std::to_string(c.N) + "_K" + std::to_string(c.K);
}

template <typename T>
DeviceBuffer upload_vector(const std::vector<T>& v) {
  DeviceBuffer b(v.size() * sizeof(v[0]));
  b.upload(v.data(), v.size() * sizeof(v[0]));
  return b;
}

struct GatedActProblem {
  ActCase c;
  int E = 0;
  int64_t R = 0, rows = 0;
  size_t elem = 0;
  std::vector<int32_t> counts, offsets, row_expert;
  DeviceBuffer a_d, w_d, off_d, re_d, bias_d, wt_d, sc_d, h_d, out_d;
  cuda::GroupedGemmArgs g;
  cuda::ActivationParams p;

  // seed: the test's own, so that each test keeps its operands.
  GatedActProblem(const ActCase& c_, std::vector<int32_t> counts_, uint32_t seed)
      : c(c_), E(static_cast<int>(counts_.size())), R(2 * c_.N), counts(std::move(counts_)) {
    offsets.assign(E + 1, 0);
    for (int e = 0; e < E; ++e) offsets[e + 1] = offsets[e] + counts[e];
    rows = offsets[E];
    row_expert.resize(rows);
    for (int e = 0; e < E; ++e)
      for (int32_t r = offsets[e]; r < offsets[e + 1]; ++r) row_expert[r] = e;
    std::mt19937 rng(seed);
    const Operands a = random_operand(c.op, rows * c.K, 1.0f, rng);
    elem = c.op == Operand::FP8 ? 1 : 2;
    const size_t expert_bytes = static_cast<size_t>(R * c.K) * elem;
    a_d = DeviceBuffer(a.bytes.size());
    w_d = DeviceBuffer(E * expert_bytes);
    a_d.upload(a.bytes.data(), a.bytes.size());
    FMOE_CUDA(cudaMemset(w_d.get(), 0xFF, E * expert_bytes));  // NaN: experts without rows are never read
    for (int e = 0; e < E; ++e)
      if (counts[e] > 0) {
        const Operands w = random_operand(c.op, R * c.K, 0.05f, rng);
        FMOE_CUDA(cudaMemcpy(static_cast<char*>(w_d.get()) + e * expert_bytes, w.bytes.data(), expert_bytes,
                             cudaMemcpyHostToDevice));
      }
    std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
    std::vector<float> bias(E * R), w_tensor(E);
    for (auto& v : bias) v = ud(rng);
    for (auto& v : w_tensor) v = 0.5f + 0.5f * (ud(rng) + 1.0f);
    const std::vector<float> scales = {0.8f /* a-scale of GEMM1 */, 0.02f /* static scale of GEMM2's input */};
    off_d = upload_vector(offsets);
    re_d = upload_vector(row_expert);
    bias_d = upload_vector(bias);
    wt_d = upload_vector(w_tensor);
    sc_d = upload_vector(scales);
    h_d = DeviceBuffer(rows * R * 4);
    out_d = DeviceBuffer(rows * c.N * elem);

    g.op = c.op;
    g.a = a_d.get();
    g.b = w_d.get();
    g.d = static_cast<float*>(h_d.get());
    g.n = R;
    g.k = c.K;
    g.groups = E;
    g.expert_offsets = static_cast<const int32_t*>(off_d.get());
    g.max_rows = rows;
    p.h = static_cast<const float*>(h_d.get());
    p.R = R;
    p.N = c.N;
    p.row_expert = static_cast<const int32_t*>(re_d.get());
    p.rows = static_cast<const int32_t*>(off_d.get()) + E;
    p.act = c.act;
    p.order = c.order;
    p.interleaved = c.interleaved;
    p.bias = c.bias ? static_cast<const float*>(bias_d.get()) : nullptr;
    p.act_dtype = c.op == Operand::FP16 ? DType::F16 : DType::BF16;
    p.out = out_d.get();
    p.op = c.op;
    if (c.op == Operand::FP8) {
      p.dq.kind = cuda::Dequant::TENSOR;
      p.dq.a_tensor = {static_cast<const float*>(sc_d.get()), false};
      p.dq.w = static_cast<const float*>(wt_d.get());
      p.quant = cuda::Fp8Quant::TENSOR_STATIC;
      p.scale = {static_cast<const float*>(sc_d.get()) + 1, false};
    }
  }
  GatedActProblem(const GatedActProblem&) = delete;
  GatedActProblem& operator=(const GatedActProblem&) = delete;

  // p.out poisoned with 0xA5 bytes (not a valid output pattern), run(), then p.out's bytes.
  template <typename F>
  std::vector<uint8_t> poisoned_run(F&& run) {
    FMOE_CUDA(cudaMemset(out_d.get(), 0xA5, out_d.bytes()));
    run();
    FMOE_CUDA(cudaDeviceSynchronize());
    return download_out();
  }
  std::vector<uint8_t> download_out() const {
    std::vector<uint8_t> h(out_d.bytes());
    out_d.download(h.data(), h.size());
    return h;
  }
};

}  // namespace fusedmoe::gputest
