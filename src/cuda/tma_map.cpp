// TMA tensor-map encoding (tma_map.hpp).
#include "cuda/tma_map.hpp"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <mutex>
#include <string>

#include "fusedmoe/error.hpp"

namespace fusedmoe::cuda {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  });
  if (fn == nullptr) throw Error("TMA tensor maps: the driver has no cuTensorMapEncodeTiled (CUDA 12+ driver needed)");
  return fn;
}

}  // namespace

CUtensorMap tma_byte_map(const void* p, int64_t rows, int64_t row_bytes, int box_bytes, int box_rows,
                         CUtensorMapSwizzle swizzle, const char* who) {
  CUtensorMap m{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(row_bytes), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_bytes)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_bytes), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode_fn()(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(p), dims, strides, box,
                                 elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error(std::string(who) + ": cuTensorMapEncodeTiled failed (" + std::to_string(static_cast<int>(r)) +
                ") for a " + std::to_string(rows) + " x " + std::to_string(row_bytes) + "-byte matrix, box " +
                std::to_string(box_bytes) + " x " + std::to_string(box_rows));
  return m;
}

CUtensorMap tma_gate_up_map(const void* p, int64_t groups, int64_t N, int64_t row_bytes, int box_bytes,
                            int box_groups, bool interleaved, CUtensorMapSwizzle swizzle, const char* who) {
  if (N % 8 != 0) throw Error(std::string(who) + ": the gate / up map needs N % 8 == 0, got N = " + std::to_string(N));
  CUtensorMap m{};
  const cuuint64_t dims[5] = {static_cast<cuuint64_t>(row_bytes), 8, 2, static_cast<cuuint64_t>(N / 8),
                              static_cast<cuuint64_t>(groups)};
  const cuuint64_t rb = static_cast<cuuint64_t>(row_bytes);
  const cuuint64_t strides[4] = {interleaved ? 2 * rb : rb, interleaved ? rb : static_cast<cuuint64_t>(N) * rb,
                                 interleaved ? 16 * rb : 8 * rb, static_cast<cuuint64_t>(2 * N) * rb};
  const cuuint32_t box[5] = {static_cast<cuuint32_t>(box_bytes), 8, 2, static_cast<cuuint32_t>(box_groups), 1};
  const cuuint32_t elem_strides[5] = {1, 1, 1, 1, 1};
  const CUresult r = encode_fn()(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 5, const_cast<void*>(p), dims, strides, box,
                                 elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error(std::string(who) + ": cuTensorMapEncodeTiled failed (" + std::to_string(static_cast<int>(r)) +
                ") for the gate / up map of " + std::to_string(groups) + " experts x 2 x " + std::to_string(N) +
                " rows of " + std::to_string(row_bytes) + " bytes" + (interleaved ? " (interleaved)" : ""));
  return m;
}

}  // namespace fusedmoe::cuda
