// The in-process thread transport: G ranks are G threads of one process sharing a ThreadGroup.
// Each collective is "publish my send side, barrier, every rank copies what it receives from
// the peers' published buffers, barrier" (the second barrier keeps a sender's buffers alive and
// unchanged until every receiver has copied). Host memory only; used by the CPU tests so that the
// whole EP dispatch / compute / combine logic runs in CI without a GPU.
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "fusedmoe/ep.hpp"
#include "fusedmoe/error.hpp"

namespace fusedmoe {

struct ThreadGroup::State {
  int world = 1;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  uint64_t generation = 0;
  bool aborted = false;
  // What each rank published for the collective in flight.
  struct Slot {
    const int32_t* counts = nullptr;
    const EpField* fields = nullptr;
    int num_fields = 0;
    const int64_t* send_offset = nullptr;
    const int64_t* send_count = nullptr;
  };
  std::vector<Slot> slots;

  void barrier() {
    std::unique_lock<std::mutex> lk(mu);
    if (aborted) throw Error("fusedmoe EP thread transport: aborted (another rank failed)");
    const uint64_t gen = generation;
    if (++arrived == world) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    cv.wait(lk, [&] { return generation != gen || aborted; });
    if (aborted) throw Error("fusedmoe EP thread transport: aborted (another rank failed)");
  }
};

ThreadGroup::ThreadGroup(int world) : state_(std::make_unique<State>()) {
  if (world < 1) throw InvalidArgument("world", ">= 1", std::to_string(world));
  state_->world = world;
  state_->slots.resize(static_cast<size_t>(world));
}
ThreadGroup::~ThreadGroup() = default;
int ThreadGroup::world() const { return state_->world; }
void ThreadGroup::abort() {
  std::lock_guard<std::mutex> lk(state_->mu);
  state_->aborted = true;
  state_->cv.notify_all();
}

namespace {

class ThreadTransport final : public Transport {
 public:
  ThreadTransport(std::shared_ptr<ThreadGroup> g, int rank) : group_(std::move(g)), rank_(rank) {
    if (rank < 0 || rank >= group_->world())
      throw InvalidArgument("rank", "in [0, " + std::to_string(group_->world()) + ")", std::to_string(rank));
  }
  int rank() const override { return rank_; }
  int world() const override { return group_->world(); }
  DeviceType device() const override { return DeviceType::CPU; }

  void exchange_counts(const int32_t* send, int32_t* recv, void*) override {
    auto* s = group_->state();
    s->slots[rank_].counts = send;
    s->barrier();
    for (int src = 0; src < s->world; ++src) recv[src] = s->slots[src].counts[rank_];
    s->barrier();
  }

  void alltoallv(const EpField* fields, int num_fields, const int64_t* send_offset, const int64_t* send_count,
                 const int64_t* recv_offset, const int64_t* recv_count, void*) override {
    auto* s = group_->state();
    auto& me = s->slots[rank_];
    me.fields = fields;
    me.num_fields = num_fields;
    me.send_offset = send_offset;
    me.send_count = send_count;
    s->barrier();
    std::string error;
    for (int src = 0; src < s->world && error.empty(); ++src) {
      const auto& peer = s->slots[src];
      const int64_t n = peer.send_count[rank_];
      if (n != recv_count[src] || peer.num_fields != num_fields) {
        error = "rank " + std::to_string(src) + " sends " + std::to_string(n) + " rows to rank " +
                std::to_string(rank_) + ", which expects " + std::to_string(recv_count[src]);
        break;
      }
      for (int f = 0; f < num_fields; ++f) {
        const size_t rb = fields[f].row_bytes;
        if (peer.fields[f].row_bytes != rb) {
          error = "field " + std::to_string(f) + " row bytes differ between ranks";
          break;
        }
        if (n > 0)
          std::memcpy(static_cast<uint8_t*>(fields[f].recv) + recv_offset[src] * rb,
                      static_cast<const uint8_t*>(peer.fields[f].send) + peer.send_offset[rank_] * rb,
                      static_cast<size_t>(n) * rb);
      }
    }
    s->barrier();
    if (!error.empty()) throw Error("fusedmoe EP thread transport: " + error);
  }

  void barrier(void*) override { group_->state()->barrier(); }

 private:
  std::shared_ptr<ThreadGroup> group_;
  int rank_;
};

}  // namespace

std::shared_ptr<Transport> make_thread_transport(std::shared_ptr<ThreadGroup> group, int rank) {
  if (!group) throw InvalidArgument("group", "a ThreadGroup", "null");
  return std::make_shared<ThreadTransport>(std::move(group), rank);
}

void run_threads(int world, const std::function<void(int, std::shared_ptr<Transport>)>& fn) {
  auto group = std::make_shared<ThreadGroup>(world);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r, make_thread_transport(group, r));
      } catch (...) {
        errors[r] = std::current_exception();
        group->abort();
      }
    });
  for (auto& t : threads) t.join();
  // The first failure that is not a consequence of another rank's abort.
  std::exception_ptr first;
  for (auto& e : errors) {
    if (!e) continue;
    if (!first) first = e;
    try {
      std::rethrow_exception(e);
    } catch (const Error& err) {
      if (std::string(err.what()).find("aborted (another rank failed)") == std::string::npos) {
        first = e;
        break;
      }
    } catch (...) {
      first = e;
      break;
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace fusedmoe
