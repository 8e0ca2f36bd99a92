#pragma once
// Expert parallelism (EP): the experts of one MoE layer split over G ranks (GPUs, or threads
// with the CPU backend), tokens moved instead of weights. Per layer call, on every rank:
//
//   dispatch  each token's hidden state (and its global top-k ids and weights) goes once to every
//             rank that owns at least one of its experts (BF16/F16/F32 rows, or FP8 e4m3 codes +
//             1x128 scales for fp8-block layers: about half the bytes of BF16);
//   compute   the rank runs its local experts on the rows it received (a fusedmoe::Layer over
//             its E_local experts with an expert_map global id -> local id or -1, so the ids it
//             does not own select nothing): one partial row per received token, already the
//             weighted sum over the local experts;
//   combine   the partial rows go back to the token's home rank, which adds them up in
//             ascending rank order (deterministic) into the output.
//
// The bytes move through a Transport: NCCL (ncclSend/ncclRecv on the caller's stream, see
// make_nccl_transport) for CUDA ranks, or an in-process thread transport for the CPU backend
// (the CPU tests run the whole EP logic with it). docs/EXPERT_PARALLEL.md has the design, the
// host synchronisation of each mode and how to launch one process per GPU or across machines.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fusedmoe/config.hpp"
#include "fusedmoe/layer.hpp"
#include "fusedmoe/tensor.hpp"

namespace fusedmoe {

// ---------------------------------------------------------------------------------------------
// Transport: what the EP layer needs from a collective library.
// ---------------------------------------------------------------------------------------------

// One array of rows taking part in an all-to-all-v: rows of row_bytes bytes.
struct EpField {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t row_bytes = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  virtual DeviceType device() const = 0;  // where the buffers live (CUDA: device memory)
  virtual int device_index() const { return 0; }
  // counts all-to-all: recv[s] = what rank s passed as send[rank()]. send/recv: world() int32
  // values in the transport's memory (device memory for NCCL: no host sync).
  virtual void exchange_counts(const int32_t* send, int32_t* recv, void* stream) = 0;
  // all-to-all-v of rows, every field with the same counts: rank d gets rows
  // [send_offset[d], send_offset[d] + send_count[d]) of each field's send array, written at
  // rows [recv_offset[s], ...) of its recv array where s = rank(); recv_count[s] must equal what
  // rank s sends here. Counts and offsets are host values (NCCL needs the sizes on the host).
  virtual void alltoallv(const EpField* fields, int num_fields, const int64_t* send_offset, const int64_t* send_count,
                         const int64_t* recv_offset, const int64_t* recv_count, void* stream) = 0;
  // Blocks the calling host thread until every rank got here (tests, benchmark). NCCL: a
  // one-element all-reduce on `stream`, then a stream synchronisation.
  virtual void barrier(void* stream) = 0;
};

// ---- the in-process thread transport (host memory; G ranks = G threads) ----
// A rendezvous shared by the G threads of one group. If one rank throws inside the EP layer,
// call abort() (run_threads does) so that the others leave their waits with an Error.
class ThreadGroup {
 public:
  explicit ThreadGroup(int world);
  ~ThreadGroup();
  int world() const;
  void abort();
  struct State;
  State* state() const { return state_.get(); }

 private:
  std::unique_ptr<State> state_;
};
std::shared_ptr<Transport> make_thread_transport(std::shared_ptr<ThreadGroup> group, int rank);
// Runs fn(rank, transport) on `world` threads over one ThreadGroup; rethrows the first exception
// after every thread has returned (the other ranks are aborted out of their waits).
void run_threads(int world, const std::function<void(int rank, std::shared_ptr<Transport>)>& fn);

// ---- NCCL ----
// Whether this build has the NCCL transport (CUDA + NCCL found at configure time). Without it
// every NCCL entry point below throws NotImplemented.
bool nccl_available();
// ncclUniqueId as plain bytes (NCCL_UNIQUE_ID_BYTES = 128), with a hex form to pass it through a
// file or an environment variable to the other processes.
struct EpUniqueId {
  std::array<char, 128> bytes{};
  std::string to_hex() const;
  static EpUniqueId from_hex(const std::string& hex);  // throws InvalidArgument
};
EpUniqueId nccl_unique_id();  // ncclGetUniqueId (rank 0 calls it, the others receive it)
// Creates the communicator (ncclCommInitRank on `device`) and owns it (ncclCommDestroy at the
// end). Collective: every rank calls it with the same id.
std::shared_ptr<Transport> make_nccl_transport(const EpUniqueId& id, int world, int rank, int device);
// Wraps the caller's communicator (an ncclComm_t passed as void*); it is not destroyed here.
// device = the CUDA device the communicator was created on.
std::shared_ptr<Transport> make_nccl_transport(void* nccl_comm, int device);
// One thread per GPU on this machine (devices 0..world-1), communicators by ncclCommInitAll;
// runs fn(rank, transport) with the thread's device current; rethrows the first exception.
void run_on_gpus(int world, const std::function<void(int rank, std::shared_ptr<Transport>)>& fn);

// A host barrier for the rank threads of one process (run_on_gpus, or your own threads). With
// one thread per GPU, a thread blocked in the CUDA driver (an allocation or a free, a copy into
// pageable memory) while a peer's NCCL kernel spins waiting for that thread's side of a
// collective never returns: let every rank finish its set-up (layers, buffers, Layer::warmup)
// and meet here before the first collective. wait(ok) also carries whether the rank's step
// succeeded: it returns true only when every rank passed ok = true in that round, so all ranks
// skip the collectives together when one failed. abort() (e.g. from a watchdog) releases every
// waiter, and every later wait, with false.
class HostBarrier {
 public:
  explicit HostBarrier(int parties);  // parties >= 1
  ~HostBarrier();
  HostBarrier(const HostBarrier&) = delete;
  HostBarrier& operator=(const HostBarrier&) = delete;
  bool wait(bool ok = true);
  void abort();
  int parties() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// ---------------------------------------------------------------------------------------------
// The expert-parallel layer.
// ---------------------------------------------------------------------------------------------

// EXACT: the per-peer token counts are exchanged on the device, then copied to the host (one
//        cudaStreamSynchronize per layer call, in dispatch) because NCCL's send/recv sizes are host
//        values; only the real rows move. Not graph capturable.
// PADDED: every rank sends max_tokens_per_rank rows to every peer (rows past the real count
//        carry ids -1, so they select nothing); no count exchange, no host synchronisation, CUDA
//        graph capturable; moves world * max_tokens_per_rank rows each way (decode-sized M).
enum class EpMode : uint8_t { EXACT, PADDED };
const char* ep_mode_name(EpMode m);

struct EpConfig {
  int64_t num_global_experts = 0;  // E
  int64_t hidden = 0;              // K
  int64_t topk = 0;
  int64_t max_tokens_per_rank = 0;  // buffers are sized once from this (tokens of one call)
  // Global placement, the same on every rank: expert_owner[e] = rank owning global expert e.
  // Empty: contiguous ranges, rank r owns [r * E / G, (r + 1) * E / G) (E % G == 0).
  // The local experts of a rank are the experts it owns in ascending global id: local id i is
  // its i-th owned expert; its local weights hold them in that order.
  std::vector<int32_t> expert_owner;
  EpMode mode = EpMode::EXACT;
  // fp8-block layers with BF16/F16/F32 tokens: send e4m3 codes + fp32 (or UE8M0, as the layer's
  // fp8_block_ue8m0) 1x128 scales, quantised exactly as the layer would (docs/SEMANTICS.md), and
  // run the local experts on the pre-quantised rows. Same result, ~half the dispatch bytes.
  bool fp8_dispatch = false;
  DType hidden_dtype = DType::BF16;  // dtype of hidden_states and output (F32, F16, BF16)
  bool apply_router_weight_on_input = false;
};

struct EpRunArgs {
  TensorView hidden_states;  // [M, K] hidden_dtype, M <= max_tokens_per_rank (M = 0 allowed)
  TensorView topk_ids;       // [M, topk] I32 global ids; ids outside [0, E) select nothing
  TensorView topk_weights;   // [M, topk] F32
  TensorView output;         // [M, K] hidden_dtype
  void* stream = nullptr;    // CUDA: the caller's cudaStream_t (also the transport's stream)
};

// Sizes of the last call (per rank), for statistics and the benchmark.
struct EpStats {
  int64_t tokens = 0;     // M
  int64_t sent_rows = 0;  // rows sent (all peers incl. self; PADDED: world * max)
  int64_t sent_rows_remote = 0;
  int64_t received_rows = 0;         // rows the local experts ran on (PADDED: world * max)
  size_t dispatch_bytes_remote = 0;  // bytes sent to other ranks by dispatch
  size_t combine_bytes_remote = 0;   // bytes sent to other ranks by combine
  bool host_synced = false;          // EXACT: the counts were copied to the host (known on the host)
};

class ExpertParallelLayer {
 public:
  // local_weights: this rank's experts (see EpConfig::expert_owner for their order), as
  // Layer takes them (device memory for a CUDA transport). A rank owning no expert passes empty
  // weights (it still forwards tokens; its compute writes zeros). Allocates every buffer here.
  ExpertParallelLayer(std::shared_ptr<Transport> transport, const LayerConfig& config,
                      const LayerWeights& local_weights, const EpConfig& ep, const LayerOptions& options = {});
  ~ExpertParallelLayer();
  ExpertParallelLayer(ExpertParallelLayer&&) noexcept;
  ExpertParallelLayer& operator=(ExpertParallelLayer&&) noexcept;

  // The three steps (in this order, same args), or run() for all of them. Collective: every
  // rank of the transport calls them, with its own tokens (M may differ, and be 0).
  void dispatch(const EpRunArgs& args);
  void compute(const EpRunArgs& args);
  void combine(const EpRunArgs& args);
  void run(const EpRunArgs& args);

  int rank() const;
  int world() const;
  int64_t num_local_experts() const;
  const std::vector<int32_t>& local_experts() const;  // global ids, ascending
  const EpConfig& config() const;
  const Layer* local_layer() const;  // nullptr when the rank owns no expert
  EpStats last_stats() const;
  // Warms up the local layer for the rows it can receive (CUDA: outside graph capture). Allocates,
  // frees and synchronises: with one thread per GPU, call it on every rank before any rank issues
  // its first collective (docs/EXPERT_PARALLEL.md, "Launching").
  void warmup(void* stream = nullptr) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Contiguous placement for E experts on G ranks: owner[e] = e / (E / G).
std::vector<int32_t> contiguous_expert_owner(int64_t num_experts, int world);
// The experts `rank` owns under `owner`, ascending.
std::vector<int32_t> owned_experts(const std::vector<int32_t>& owner, int rank);

}  // namespace fusedmoe
