#include "ceilings.hpp"

#include <cublasLt.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "common.hpp"
#include "kernels.hpp"
#include "timing.hpp"

namespace fmbench {
namespace {

struct LtError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

#define FMB_LT(expr)                                                                              \
  do {                                                                                            \
    cublasStatus_t st_ = (expr);                                                                  \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                             \
      throw LtError(std::string(#expr) + " failed: status " + std::to_string(static_cast<int>(st_))); \
  } while (0)

struct GemmSpec {
  const char* name;
  cudaDataType_t ab;
  cudaDataType_t cd;
  cublasComputeType_t compute;
  bool fp8;
  bool fast_accum;
};

// Median time (ms) of an m = n = k product D = A^T B (TN, column-major as cuBLASLt counts).
double time_gemm(cublasLtHandle_t lt, const GemmSpec& g, int size, int reps, cudaStream_t stream, RepTimer& timer) {
  const int64_t m = size, n = size, k = size;
  const size_t ab_bytes = g.ab == CUDA_R_32F ? 4 : g.ab == CUDA_R_16BF ? 2 : 1;
  const size_t cd_bytes = g.cd == CUDA_R_32F ? 4 : 2;
  DeviceBuffer A(static_cast<size_t>(m * k) * ab_bytes), B(static_cast<size_t>(k * n) * ab_bytes);
  DeviceBuffer D(static_cast<size_t>(m * n) * cd_bytes), scale(sizeof(float));
  const size_t ws_bytes = size_t(64) << 20;
  DeviceBuffer ws(ws_bytes);
  const fusedmoe::DType dt = g.ab == CUDA_R_32F ? fusedmoe::DType::F32
                             : g.ab == CUDA_R_16BF ? fusedmoe::DType::BF16
                                                   : fusedmoe::DType::F8_E4M3;
  // Random operands (never zeros: a product of zeros runs faster than real data).
  const float amp = g.fp8 ? 4.0f : 1.0f;
  gen_uniform(A.get(), dt, static_cast<size_t>(m * k), 11, -amp, amp, stream);
  gen_uniform(B.get(), dt, static_cast<size_t>(k * n), 12, -amp, amp, stream);
  gen_uniform(scale.get(), fusedmoe::DType::F32, 1, 13, 0.5f, 0.5f, stream);

  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  auto cleanup = [&]() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (op) cublasLtMatmulDescDestroy(op);
  };
  try {
    FMB_LT(cublasLtMatmulDescCreate(&op, g.compute, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    FMB_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    FMB_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    if (g.fp8) {
      const void* sp = scale.get();
      FMB_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sp, sizeof(sp)));
      FMB_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sp, sizeof(sp)));
      const int8_t fast = g.fast_accum ? 1 : 0;
      FMB_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
    }
    FMB_LT(cublasLtMatrixLayoutCreate(&la, g.ab, k, m, k));  // A stored k x m, used transposed
    FMB_LT(cublasLtMatrixLayoutCreate(&lb, g.ab, k, n, k));
    FMB_LT(cublasLtMatrixLayoutCreate(&lc, g.cd, m, n, m));
    FMB_LT(cublasLtMatmulPreferenceCreate(&pref));
    FMB_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes)));
    cublasLtMatmulHeuristicResult_t heur[4];
    int found = 0;
    FMB_LT(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 4, heur, &found));
    if (found == 0) throw LtError("no cuBLASLt algorithm for this problem");
    const float alpha = 1.0f, beta = 0.0f;
    // Of the heuristic's first candidates, keep the fastest (each timed briefly).
    double best = 1e30;
    std::string last_error;
    for (int c = 0; c < found; ++c) {
      auto launch = [&](int) {
        FMB_LT(cublasLtMatmul(lt, op, &alpha, A.get(), la, B.get(), lb, &beta, D.get(), lc, D.get(), lc, &heur[c].algo,
                              ws.get(), ws_bytes, stream));
      };
      try {
        launch(0);
        launch(0);
        FMB_CUDA(cudaStreamSynchronize(stream));
        const Stats st = summarize(timer.run(c == 0 ? reps : std::max(3, reps / 2), launch));
        best = std::min(best, st.median);
      } catch (const LtError& e) {  // a candidate that does not launch: try the next
        last_error = e.what();
        FMB_CUDA(cudaStreamSynchronize(stream));
      }
    }
    cleanup();
    if (best >= 1e30) throw LtError("no candidate algorithm ran: " + last_error);
    return best;
  } catch (...) {
    cleanup();
    throw;
  }
}

}  // namespace

Ceilings measure_ceilings(const CeilingOptions& opt, cudaStream_t stream, void* flush_buffer, size_t flush_bytes,
                          FlushMode flush_mode) {
  Ceilings c;
  c.measured = true;
  std::ostringstream errs;
  RepTimer timer(stream, flush_buffer, flush_bytes, std::max(opt.reps, 4), flush_mode);
  const int sms = std::max(1, opt.device_sm_count);

  // HBM read bandwidth.
  try {
    size_t free_b = 0, total_b = 0;
    FMB_CUDA(cudaMemGetInfo(&free_b, &total_b));
    size_t bytes = std::min(opt.read_bytes, free_b / 3);
    bytes &= ~size_t(0xfffff);  // whole MiB
    DeviceBuffer buf(bytes), sink(sizeof(unsigned long long));
    gen_bytes(buf.as<uint8_t>(), bytes, 21, stream);
    FMB_CUDA(cudaMemsetAsync(sink.get(), 0, sizeof(unsigned long long), stream));
    struct Cfg { int blocks_per_sm, threads, unroll; };
    const Cfg cfgs[] = {{4, 512, 4}, {8, 256, 4}, {2, 1024, 8}, {16, 256, 2}, {1, 1024, 8}};
    for (const Cfg& g : cfgs) {
      auto launch = [&](int) {
        hbm_read(buf.get(), bytes, g.blocks_per_sm * sms, g.threads, g.unroll, sink.as<unsigned long long>(), stream);
      };
      launch(0);
      FMB_CUDA(cudaStreamSynchronize(stream));
      const Stats st = summarize(timer.run(opt.reps, launch));
      const double tbps = static_cast<double>(bytes) / (st.median * 1e-3) / 1e12;
      if (tbps > c.hbm_read_tbps) {
        c.hbm_read_tbps = tbps;
        std::ostringstream os;
        os << g.blocks_per_sm << " blocks/SM x " << g.threads << " threads, " << g.unroll
           << " x 16-byte loads in flight, " << (bytes >> 20) << " MiB";
        c.hbm_read_config = os.str();
      }
    }
  } catch (const std::exception& e) {
    errs << "hbm read: " << e.what() << "; ";
  }

  // Device-to-device copy bandwidth.
  try {
    size_t free_b = 0, total_b = 0;
    FMB_CUDA(cudaMemGetInfo(&free_b, &total_b));
    size_t bytes = std::min(opt.copy_bytes, free_b / 4);
    bytes &= ~size_t(0xfffff);
    DeviceBuffer src(bytes), dst(bytes);
    gen_bytes(src.as<uint8_t>(), bytes, 22, stream);
    auto launch = [&](int) { FMB_CUDA(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, stream)); };
    launch(0);
    FMB_CUDA(cudaStreamSynchronize(stream));
    const Stats st = summarize(timer.run(opt.reps, launch));
    c.copy_tbps = 2.0 * static_cast<double>(bytes) / (st.median * 1e-3) / 1e12;
  } catch (const std::exception& e) {
    errs << "copy: " << e.what() << "; ";
  }

  // Matmul rates.
  cublasLtHandle_t lt = nullptr;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
    errs << "cublasLtCreate failed; ";
  } else {
    const GemmSpec specs[] = {
        {"bf16", CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, false, false},
        {"fp8", CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F, true, false},
        {"fp8-fast-accum", CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F, true, true},
        {"fp32-simt", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, false, false},
        {"tf32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, false, false},
    };
    double* outs[] = {&c.bf16_tflops, &c.fp8_tflops, &c.fp8_fast_accum_tflops, &c.fp32_simt_tflops, &c.tf32_tflops};
    for (int i = 0; i < 5; ++i) {
      const bool f32 = specs[i].ab == CUDA_R_32F;
      const int size = f32 ? opt.gemm_size_fp32 : opt.gemm_size;
      try {
        const double ms = time_gemm(lt, specs[i], size, f32 ? std::max(3, opt.reps / 2) : opt.reps, stream, timer);
        *outs[i] = 2.0 * static_cast<double>(size) * size * size / (ms * 1e-3) / 1e12;
      } catch (const std::exception& e) {
        errs << specs[i].name << " gemm: " << e.what() << "; ";
        cudaGetLastError();
      }
    }
    cublasLtDestroy(lt);
  }
  c.errors = errs.str();
  return c;
}

}  // namespace fmbench
