#include "timing.hpp"

#include <algorithm>
#include <cmath>
#include <exception>

#include "common.hpp"
#include "kernels.hpp"

namespace fmbench {

double percentile_sorted(const std::vector<double>& s, double q) {
  if (s.empty()) return 0;
  if (s.size() == 1) return s[0];
  const double pos = q * static_cast<double>(s.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, s.size() - 1);
  const double f = pos - static_cast<double>(lo);
  return s[lo] * (1 - f) + s[hi] * f;
}

Stats summarize(std::vector<double> v) {
  Stats st;
  if (v.empty()) return st;
  std::sort(v.begin(), v.end());
  st.n = static_cast<int>(v.size());
  st.median = percentile_sorted(v, 0.5);
  st.p10 = percentile_sorted(v, 0.1);
  st.p90 = percentile_sorted(v, 0.9);
  st.min = v.front();
  st.max = v.back();
  double sum = 0;
  for (double x : v) sum += x;
  st.mean = sum / static_cast<double>(v.size());
  return st;
}

const char* flush_mode_name(FlushMode m) { return m == FlushMode::kRead ? "read" : "write"; }

bool parse_flush_mode(const std::string& s, FlushMode* m) {
  if (s == "read") *m = FlushMode::kRead;
  else if (s == "write") *m = FlushMode::kWrite;
  else return false;
  return true;
}

RepTimer::RepTimer(cudaStream_t stream, void* flush_buffer, size_t flush_bytes, int max_reps, FlushMode mode)
    : stream_(stream),
      flush_buffer_(flush_buffer),
      flush_bytes_(flush_buffer ? flush_bytes / 16 * 16 : 0),
      max_reps_(max_reps),
      mode_(mode) {
  if (flush_bytes_ && mode_ == FlushMode::kRead) {
    FMB_CUDA(cudaMalloc(&sink_, sizeof(unsigned long long)));
    FMB_CUDA(cudaMemsetAsync(sink_, 0, sizeof(unsigned long long), stream_));
    FMB_CUDA(cudaMemsetAsync(flush_buffer_, 0x5a, flush_bytes_, stream_));
  }
  start_.resize(static_cast<size_t>(max_reps));
  stop_.resize(static_cast<size_t>(max_reps));
  for (int i = 0; i < max_reps; ++i) {
    FMB_CUDA(cudaEventCreate(&start_[i]));
    FMB_CUDA(cudaEventCreate(&stop_[i]));
  }
}

RepTimer::~RepTimer() {
  if (sink_) cudaFree(sink_);
  for (cudaEvent_t e : start_) cudaEventDestroy(e);
  for (cudaEvent_t e : stop_) cudaEventDestroy(e);
}

void RepTimer::flush() {
  if (flush_bytes_ == 0) return;
  if (mode_ == FlushMode::kRead) {
    l2_flush_read(flush_buffer_, flush_bytes_, sink_, stream_);
    return;
  }
  // A different byte each time, so no layer of the memory system can skip the write.
  FMB_CUDA(cudaMemsetAsync(flush_buffer_, (flush_count_++ * 37 + 1) & 0xff, flush_bytes_, stream_));
}

std::vector<double> RepTimer::run(int reps, const std::function<void(int)>& body) {
  reps = std::min(reps, max_reps_);
  for (int r = 0; r < reps; ++r) {
    flush();
    FMB_CUDA(cudaEventRecord(start_[r], stream_));
    body(r);
    FMB_CUDA(cudaEventRecord(stop_[r], stream_));
  }
  FMB_CUDA(cudaStreamSynchronize(stream_));
  std::vector<double> ms(static_cast<size_t>(reps));
  for (int r = 0; r < reps; ++r) {
    float t = 0;
    FMB_CUDA(cudaEventElapsedTime(&t, start_[r], stop_[r]));
    ms[r] = t;
  }
  return ms;
}

cudaGraphExec_t capture_graph(cudaStream_t stream, const std::function<void()>& fn, std::string* why) {
  cudaGraph_t graph = nullptr;
  cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
  if (e != cudaSuccess) {
    *why = std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(e);
    cudaGetLastError();
    return nullptr;
  }
  std::string thrown;
  try {
    fn();
  } catch (const std::exception& ex) {
    thrown = ex.what();
  }
  e = cudaStreamEndCapture(stream, &graph);
  if (!thrown.empty() || e != cudaSuccess || graph == nullptr) {
    *why = !thrown.empty() ? "run() threw during capture: " + thrown
                           : std::string("cudaStreamEndCapture: ") + cudaGetErrorString(e);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();  // clear the (non-sticky) capture error
    return nullptr;
  }
  cudaGraphExec_t exec = nullptr;
  e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess) {
    *why = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(e);
    cudaGetLastError();
    return nullptr;
  }
  return exec;
}

}  // namespace fmbench
