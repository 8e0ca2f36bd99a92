#pragma once
// Shared by the subcommands: backend choice, running a layer on CPU or CUDA, progress lines,
// comparing outputs, host memory.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "fusedmoe/layer.hpp"
#include "fusedmoe/layer_file.hpp"

namespace fusedmoe::cli {

// "auto" | "cpu" | "cuda" -> Backend (UsageError otherwise).
Backend parse_backend(const std::string& s);
// AUTO -> CUDA when the library has the CUDA backend and a GPU is present, else CPU.
// CUDA requested but impossible -> Error saying why.
Backend resolve_backend(Backend requested);

struct RunResult {
  HostTensor output;
  double ms = 0;  // wall time of the last run (CUDA: including the device synchronisation)
};

// Runs the layer `iters` times (>= 1) on the batch and returns the last output.
// CPU: threads (0 = all cores) and precision as given; CUDA: weights and inputs are copied to
// the current device first (not timed).
RunResult execute(const LayerFile& layer, const InputFile& input, Backend backend, int threads,
                  CpuPrecision precision, int iters);

// Throws Error when K or N do not fit the format's blocks (w4a8 128, mxfp4 32, nvfp4 16), so a
// long conversion fails before it starts rather than at the end.
void check_shape_for_format(Format f, int64_t K, int64_t N);
// "mxfp4" + "fp8" -> ActDtype, with the contract's rule of which format allows which (UsageError).
ActDtype parse_act_dtype(Format f, const std::string& s);

// execute() on `backend`; when the user asked for AUTO and the CUDA backend cannot run this
// layer (NotImplemented, e.g. a format without GPU kernels yet), says so on stderr and runs it
// on the CPU instead. *used gets the backend that ran.
RunResult execute_with_fallback(const LayerFile& layer, const InputFile& input, Backend requested, Backend backend,
                                int threads, int iters, Backend* used);

// Checks what the input file cannot check alone: expert_map entries are -1 or a local expert.
void check_input_against_layer(const InputFile& input, const LayerFile& layer, const std::string& what);

// Element i of a F32/F16/BF16 tensor as double.
double element(const HostTensor& t, int64_t i);
// ||a - ref||_F / ||ref||_F over the given rows of two [M, K] tensors; NaN/Inf anywhere -> +inf.
double rel_frobenius(const HostTensor& a, const std::vector<int64_t>& rows_a, const HostTensor& ref);

// /proc/meminfo MemAvailable in bytes (0 when unknown).
uint64_t mem_available_bytes();
std::string gib(double bytes);  // "12.3 GiB" (or "4.5 MiB" below 1 GiB)

// "stage x/total" lines on stderr, at most about one a second (and always the last one).
class Progress {
 public:
  Progress(std::string stage, int64_t total, bool quiet);
  void done_one();  // thread-safe

 private:
  std::string stage_;
  int64_t total_;
  bool quiet_;
  std::atomic<int64_t> done_{0};
  int64_t printed_ = 0;  // highest count printed (threads may arrive out of order)
  std::mutex mu_;
  std::chrono::steady_clock::time_point last_;
};

// A line on stderr (unless quiet).
void note(bool quiet, const std::string& line);

}  // namespace fusedmoe::cli
