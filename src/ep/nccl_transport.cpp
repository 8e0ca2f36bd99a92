// The NCCL transport (built when CUDA and NCCL are found): counts and rows move with
// ncclSend / ncclRecv pairs inside one ncclGroupStart/End per collective, on the caller's
// stream. No host synchronisation here; NCCL point-to-point calls are CUDA-graph capturable
// (NCCL >= 2.9). A rank's rows to itself are a cudaMemcpyAsync (no NCCL self-connection).
// NVLink SHARP / multicast (NVLS) is never needed by send/recv; set NCCL_NVLS_ENABLE=0 anyway
// where the machine forbids multicast objects (scripts/ep_check.sh does).
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "fusedmoe/ep.hpp"
#include "fusedmoe/error.hpp"

namespace fusedmoe {
namespace {

void nccl_ok(ncclResult_t r, const char* what) {
  if (r != ncclSuccess && r != ncclInProgress)
    throw Error(std::string("fusedmoe EP: ") + what + ": " + ncclGetErrorString(r));
}
void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string("fusedmoe EP: ") + what + ": " + cudaGetErrorString(e));
}

class NcclTransport final : public Transport {
 public:
  NcclTransport(ncclComm_t comm, int device, bool owned) : comm_(comm), device_(device), owned_(owned) {
    nccl_ok(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank");
    nccl_ok(ncclCommCount(comm_, &world_), "ncclCommCount");
    int prev = 0;
    cuda_ok(cudaGetDevice(&prev), "cudaGetDevice");
    cuda_ok(cudaSetDevice(device_), "cudaSetDevice");
    cuda_ok(cudaMalloc(&scratch_, sizeof(float)), "cudaMalloc");
    cudaSetDevice(prev);
  }
  ~NcclTransport() override {
    if (scratch_) cudaFree(scratch_);
    if (owned_ && comm_) ncclCommDestroy(comm_);
  }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  DeviceType device() const override { return DeviceType::CUDA; }
  int device_index() const override { return device_; }

  void exchange_counts(const int32_t* send, int32_t* recv, void* stream) override {
    auto st = static_cast<cudaStream_t>(stream);
    cuda_ok(cudaMemcpyAsync(recv + rank_, send + rank_, sizeof(int32_t), cudaMemcpyDeviceToDevice, st),
            "cudaMemcpyAsync (own count)");
    if (world_ == 1) return;
    nccl_ok(ncclGroupStart(), "ncclGroupStart");
    for (int p = 0; p < world_; ++p) {
      if (p == rank_) continue;
      nccl_ok(ncclSend(send + p, 1, ncclInt32, p, comm_, st), "ncclSend (counts)");
      nccl_ok(ncclRecv(recv + p, 1, ncclInt32, p, comm_, st), "ncclRecv (counts)");
    }
    nccl_ok(ncclGroupEnd(), "ncclGroupEnd (counts)");
  }

  void alltoallv(const EpField* fields, int num_fields, const int64_t* send_offset, const int64_t* send_count,
                 const int64_t* recv_offset, const int64_t* recv_count, void* stream) override {
    auto st = static_cast<cudaStream_t>(stream);
    for (int f = 0; f < num_fields; ++f) {
      const size_t rb = fields[f].row_bytes;
      const int64_t n = send_count[rank_];
      if (n != recv_count[rank_])
        throw Error("fusedmoe EP: own send count " + std::to_string(n) + " != own receive count " +
                    std::to_string(recv_count[rank_]));
      if (n > 0)
        cuda_ok(cudaMemcpyAsync(static_cast<uint8_t*>(fields[f].recv) + recv_offset[rank_] * rb,
                                static_cast<const uint8_t*>(fields[f].send) + send_offset[rank_] * rb,
                                static_cast<size_t>(n) * rb, cudaMemcpyDeviceToDevice, st),
                "cudaMemcpyAsync (own rows)");
    }
    if (world_ == 1) return;
    nccl_ok(ncclGroupStart(), "ncclGroupStart");
    for (int p = 0; p < world_; ++p) {
      if (p == rank_) continue;
      for (int f = 0; f < num_fields; ++f) {
        const size_t rb = fields[f].row_bytes;
        if (send_count[p] > 0)
          nccl_ok(ncclSend(static_cast<const uint8_t*>(fields[f].send) + send_offset[p] * rb,
                           static_cast<size_t>(send_count[p]) * rb, ncclUint8, p, comm_, st),
                  "ncclSend");
        if (recv_count[p] > 0)
          nccl_ok(ncclRecv(static_cast<uint8_t*>(fields[f].recv) + recv_offset[p] * rb,
                           static_cast<size_t>(recv_count[p]) * rb, ncclUint8, p, comm_, st),
                  "ncclRecv");
      }
    }
    nccl_ok(ncclGroupEnd(), "ncclGroupEnd");
  }

  void barrier(void* stream) override {
    auto st = static_cast<cudaStream_t>(stream);
    nccl_ok(ncclAllReduce(scratch_, scratch_, 1, ncclFloat, ncclSum, comm_, st), "ncclAllReduce (barrier)");
    cuda_ok(cudaStreamSynchronize(st), "cudaStreamSynchronize (barrier)");
  }

 private:
  ncclComm_t comm_ = nullptr;
  int device_ = 0;
  bool owned_ = false;
  int rank_ = 0, world_ = 1;
  void* scratch_ = nullptr;
};

}  // namespace

bool nccl_available() { return true; }

EpUniqueId nccl_unique_id() {
  static_assert(sizeof(ncclUniqueId) == sizeof(EpUniqueId::bytes), "NCCL_UNIQUE_ID_BYTES changed");
  ncclUniqueId id;
  nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
  EpUniqueId out;
  std::memcpy(out.bytes.data(), id.internal, sizeof(id.internal));
  return out;
}

std::shared_ptr<Transport> make_nccl_transport(const EpUniqueId& uid, int world, int rank, int device) {
  if (world < 1) throw InvalidArgument("world", ">= 1", std::to_string(world));
  if (rank < 0 || rank >= world) throw InvalidArgument("rank", "in [0, world)", std::to_string(rank));
  cuda_ok(cudaSetDevice(device), "cudaSetDevice");
  ncclUniqueId id;
  std::memcpy(id.internal, uid.bytes.data(), sizeof(id.internal));
  ncclComm_t comm = nullptr;
  nccl_ok(ncclCommInitRank(&comm, world, id, rank), "ncclCommInitRank");
  return std::make_shared<NcclTransport>(comm, device, true);
}

std::shared_ptr<Transport> make_nccl_transport(void* nccl_comm, int device) {
  if (!nccl_comm) throw InvalidArgument("nccl_comm", "an ncclComm_t", "null");
  return std::make_shared<NcclTransport>(static_cast<ncclComm_t>(nccl_comm), device, false);
}

void run_on_gpus(int world, const std::function<void(int, std::shared_ptr<Transport>)>& fn) {
  int ndev = 0;
  cuda_ok(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount");
  if (world < 1 || world > ndev)
    throw InvalidArgument("world", "in [1, " + std::to_string(ndev) + "] (CUDA devices here)", std::to_string(world));
  std::vector<ncclComm_t> comms(static_cast<size_t>(world), nullptr);
  std::vector<int> devs(static_cast<size_t>(world));
  for (int i = 0; i < world; ++i) devs[i] = i;
  nccl_ok(ncclCommInitAll(comms.data(), world, devs.data()), "ncclCommInitAll");
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        cuda_ok(cudaSetDevice(r), "cudaSetDevice");
        // The transport owns (and destroys) the communicator when the rank is done with it.
        fn(r, std::make_shared<NcclTransport>(comms[r], r, true));
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace fusedmoe
