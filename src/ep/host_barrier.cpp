// fusedmoe::HostBarrier (ep.hpp): a reusable generation-counting barrier whose rounds also AND
// the ranks' "ok" flags, and which an abort() opens for good.
#include <condition_variable>
#include <mutex>
#include <string>

#include "fusedmoe/ep.hpp"
#include "fusedmoe/error.hpp"

namespace fusedmoe {

struct HostBarrier::State {
  std::mutex mu;
  std::condition_variable cv;
  int parties = 1, count = 0, gen = 0;
  bool failed = false;    // a rank of the current round passed ok = false
  bool round_ok = true;   // the result of the last completed round
  bool aborted = false;
};

HostBarrier::HostBarrier(int parties) : s_(std::make_unique<State>()) {
  if (parties < 1) throw InvalidArgument("parties", ">= 1", std::to_string(parties));
  s_->parties = parties;
}

HostBarrier::~HostBarrier() = default;

int HostBarrier::parties() const { return s_->parties; }

bool HostBarrier::wait(bool ok) {
  State& s = *s_;
  std::unique_lock<std::mutex> lk(s.mu);
  if (s.aborted) return false;
  if (!ok) s.failed = true;
  const int gen = s.gen;
  if (++s.count == s.parties) {  // the last to arrive closes the round
    s.count = 0;
    ++s.gen;
    s.round_ok = !s.failed;
    s.failed = false;
    s.cv.notify_all();
    return s.round_ok;
  }
  s.cv.wait(lk, [&] { return s.gen != gen || s.aborted; });
  // round_ok is that of this round: a later round cannot close before this thread arrives.
  return !s.aborted && s.round_ok;
}

void HostBarrier::abort() {
  std::lock_guard<std::mutex> lk(s_->mu);
  s_->aborted = true;
  s_->cv.notify_all();
}

}  // namespace fusedmoe
