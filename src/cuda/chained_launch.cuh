#pragma once
// Programmatic dependent launch (PDL) for the stage kernels of one run().
//
// A run() is a chain of short kernels (plan, gather, GEMM, activation, GEMM, finalize; at decode
// sizes fewer: the plan inside the gather, GEMM1 + activation and GEMM2 + finalize fused); at decode
// sizes each lasts a few microseconds and the gap between one kernel's last block and the next
// kernel's first block is a visible part of the layer. launch_chained() launches with
// cudaLaunchAttributeProgrammaticStreamSerialization: the next kernel may be scheduled as soon as
// every block of the previous one has executed griddepcontrol.launch_dependents, so its launch
// and block start-up overlap the previous kernel's tail.
//
// The contract, checked on the source by tests/cpu/test_chained_launch_rule.cpp for every __global__ in src/cuda:
// every kernel launched this way calls chain_wait() as its FIRST statement. griddepcontrol.wait
// blocks until the previous grid has completed and its memory operations are visible, so nothing
// the kernel reads or writes can race the previous kernel; only then does it let its own
// successor launch. By induction, when a chained kernel starts, the kernel two places before it
// has completed (every block passes the wait before it exits, including blocks without work).
// The reviewed exceptions, small_m_gemm_kernel and stream_gemm_kernel, read the plan's offsets (and
// the constant weights) before their wait on that guarantee; where the kernel right before wrote
// the offsets (the plan inside the gather) they are told so (GroupedGemmArgs::offsets_final_at_launch)
// and wait first. finalize_vec_kernel reads its first token's slots, and the row activation kernels
// their first row's expert and factor, early only when told (FinalizeParams::early,
// ActivationParams::early: the 4-bit layers, where the GEMM before them is one of our chained
// kernels). In a stream without a programmatic predecessor (first kernel, after a memset, a
// CUTLASS kernel launched plainly, or a user's kernel) the wait returns at once after the usual
// stream ordering. Stream capture records the same edges in a CUDA graph.
#include <cuda_runtime.h>

#include <utility>

#include "cuda/cuda_check.hpp"

namespace fusedmoe::cuda {

__device__ __forceinline__ void chain_wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

inline cudaLaunchConfig_t launch_config(dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem_bytes;
  cfg.stream = stream;
  return cfg;
}

// cluster: thread-block cluster dimensions (each grid dimension a multiple of its own); 1 x 1 x 1
// launches without clusters.
template <typename... Params, typename... Args>
void launch_chained_clusters(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes,
                             cudaStream_t stream, dim3 cluster, Args&&... args) {
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = cluster.x;
  attr[1].val.clusterDim.y = cluster.y;
  attr[1].val.clusterDim.z = cluster.z;
  cudaLaunchConfig_t cfg = launch_config(grid, block, smem_bytes, stream);
  cfg.attrs = attr;
  cfg.numAttrs = cluster.x * cluster.y * cluster.z > 1 ? 2 : 1;
  FUSEDMOE_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

template <typename... Params, typename... Args>
void launch_chained(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
                    Args&&... args) {
  launch_chained_clusters(kernel, grid, block, smem_bytes, stream, dim3(1, 1, 1), std::forward<Args>(args)...);
}

// The same kernel launched without programmatic serialisation: it starts once the previous kernel in the stream has
// ended (its chain_wait() then returns at once). For grids under one wave whose blocks, started early beside the
// previous kernel's, would be placed unevenly on the SMs (w4_gemm.cu launch_instance).
template <typename... Params, typename... Args>
void launch_unchained(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
                      Args&&... args) {
  const cudaLaunchConfig_t cfg = launch_config(grid, block, smem_bytes, stream);  // no attributes
  FUSEDMOE_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace fusedmoe::cuda
