#pragma once
// Ceilings measured in the same run as the points: HBM read bandwidth (a read-only kernel over
// several GB), device-to-device copy bandwidth, and dense matmul rates through cuBLASLt.
#include <cuda_runtime.h>

#include <string>

#include "timing.hpp"

namespace fmbench {

struct CeilingOptions {
  size_t read_bytes = size_t(4) << 30;  // buffer the read kernel streams over
  size_t copy_bytes = size_t(2) << 30;  // bytes copied (read + write counted)
  int gemm_size = 8192;                 // m = n = k of the bf16 / fp8 products
  int gemm_size_fp32 = 8192;            // m = n = k of the fp32 SIMT / TF32 products
  int reps = 10;
  int device_sm_count = 132;
};

struct Ceilings {
  bool measured = false;
  double hbm_read_tbps = 0;     // best of a few launch shapes, median over reps, bytes read / time
  std::string hbm_read_config;  // the launch shape that gave it
  double copy_tbps = 0;         // cudaMemcpyAsync D2D: (read + written bytes) / time
  double bf16_tflops = 0;       // cuBLASLt BF16 TN, fp32 accumulate, bf16 out
  double fp8_tflops = 0;        // cuBLASLt E4M3 TN, fp32 scales, bf16 out, default accumulation
  double fp8_fast_accum_tflops = 0;  // same with CUBLASLT_MATMUL_DESC_FAST_ACCUM
  double fp32_simt_tflops = 0;  // cuBLASLt FP32, CUBLAS_COMPUTE_32F (no TF32)
  double tf32_tflops = 0;       // cuBLASLt FP32, CUBLAS_COMPUTE_32F_FAST_TF32
  std::string errors;           // what could not be measured, and why
};

Ceilings measure_ceilings(const CeilingOptions& opt, cudaStream_t stream, void* flush_buffer, size_t flush_bytes,
                          FlushMode flush_mode);

}  // namespace fmbench
