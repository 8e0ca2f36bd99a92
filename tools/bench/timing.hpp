#pragma once
// Timing: per repetition an L2 flush (a write of a buffer larger than L2, not timed), then a
// start event, the timed work (a direct call or a CUDA-graph launch), a stop event.
#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <vector>

namespace fmbench {

struct Stats {
  int n = 0;
  double median = 0, p10 = 0, p90 = 0, min = 0, max = 0, mean = 0;
};
// Percentiles by linear interpolation between order statistics. Empty input -> n = 0.
Stats summarize(std::vector<double> v);
double percentile_sorted(const std::vector<double>& sorted, double q);

class RepTimer {
 public:
  // flush_bytes == 0 disables the flush.
  RepTimer(cudaStream_t stream, void* flush_buffer, size_t flush_bytes, int max_reps);
  ~RepTimer();
  RepTimer(const RepTimer&) = delete;
  RepTimer& operator=(const RepTimer&) = delete;

  // Times body(rep) for rep = 0..reps-1 (reps <= max_reps); returns milliseconds per rep.
  // Synchronises the stream at the end.
  std::vector<double> run(int reps, const std::function<void(int)>& body);
  // One flush on the stream (before an untimed measurement such as run_timed()).
  void flush();
  size_t flush_bytes() const { return flush_bytes_; }
  int max_reps() const { return max_reps_; }

 private:
  cudaStream_t stream_;
  void* flush_buffer_;
  size_t flush_bytes_;
  int max_reps_;
  int flush_count_ = 0;
  std::vector<cudaEvent_t> start_, stop_;
};

// Captures fn() (work enqueued on `stream`) into an instantiated graph. On failure returns
// nullptr, sets *why, and leaves the stream usable.
cudaGraphExec_t capture_graph(cudaStream_t stream, const std::function<void()>& fn, std::string* why);

}  // namespace fmbench
