#pragma once
// Timing: per repetition an L2 flush (a pass over a buffer larger than L2, not timed), then a
// start event, the timed work (a direct call or a CUDA-graph launch), a stop event.
//
// Flush modes. kWrite (a memset of the buffer) leaves the L2 full of dirty lines of that buffer:
// the timed work's first ~L2-size of misses then each evict a dirty line, so its reads share
// HBM with up to L2-size of write-backs that belong to the flush, not to the work (about as
// many bytes as a one-token layer reads). kRead (16-byte loads over the buffer, allocated in L2)
// evicts the same data but leaves clean lines: the work starts with no write-back debt, as the
// read-bandwidth ceiling (a multi-GB read) is measured.
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

enum class FlushMode { kRead, kWrite };
const char* flush_mode_name(FlushMode m);
// "read" / "write" -> mode; false for anything else.
bool parse_flush_mode(const std::string& s, FlushMode* m);

class RepTimer {
 public:
  // flush_bytes == 0 disables the flush. kRead fills the buffer once here (its bytes are read by
  // every flush and must be initialised).
  RepTimer(cudaStream_t stream, void* flush_buffer, size_t flush_bytes, int max_reps,
           FlushMode mode = FlushMode::kRead);
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
  FlushMode mode_;
  unsigned long long* sink_ = nullptr;  // kRead: the flush kernel's never-written result
  int flush_count_ = 0;
  std::vector<cudaEvent_t> start_, stop_;
};

// Captures fn() (work enqueued on `stream`) into an instantiated graph. On failure returns
// nullptr, sets *why, and leaves the stream usable.
cudaGraphExec_t capture_graph(cudaStream_t stream, const std::function<void()>& fn, std::string* why);

}  // namespace fmbench
