#pragma once
// The CUDA side of the command (compiled for real only with FUSEDMOE_WITH_CUDA): copying a
// layer and a batch to the GPU and running them there.
#include "common.hpp"

namespace fusedmoe::cli {

int cuda_device_count();  // 0 without CUDA or without a GPU
RunResult execute_cuda(const LayerFile& layer, const InputFile& input, int iters);

}  // namespace fusedmoe::cli
