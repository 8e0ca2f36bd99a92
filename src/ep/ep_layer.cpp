// ExpertParallelLayer: buffers, argument checks and the order of the steps. The per-row work is
// in the engines (host_engine.cpp, device_engine.cu); the bytes move through the Transport.
#include <algorithm>
#include <cstring>
#include <exception>
#include <numeric>
#include <string>

#include "ep/ep_internal.hpp"
#include "fusedmoe/error.hpp"

namespace fusedmoe {

const char* ep_mode_name(EpMode m) { return m == EpMode::EXACT ? "exact" : "padded"; }

std::vector<int32_t> contiguous_expert_owner(int64_t num_experts, int world) {
  if (world < 1) throw InvalidArgument("world", ">= 1", std::to_string(world));
  if (num_experts < world || num_experts % world != 0)
    throw InvalidArgument("num_experts", "a positive multiple of the world size " + std::to_string(world),
                          std::to_string(num_experts));
  std::vector<int32_t> owner(static_cast<size_t>(num_experts));
  const int64_t per = num_experts / world;
  for (int64_t e = 0; e < num_experts; ++e) owner[e] = static_cast<int32_t>(e / per);
  return owner;
}

std::vector<int32_t> owned_experts(const std::vector<int32_t>& owner, int rank) {
  std::vector<int32_t> out;
  for (size_t e = 0; e < owner.size(); ++e)
    if (owner[e] == rank) out.push_back(static_cast<int32_t>(e));
  return out;
}

namespace {
const char kHex[] = "0123456789abcdef";
int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::string EpUniqueId::to_hex() const {
  std::string s;
  s.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    s.push_back(kHex[u >> 4]);
    s.push_back(kHex[u & 15]);
  }
  return s;
}

EpUniqueId EpUniqueId::from_hex(const std::string& hex_in) {
  std::string hex = hex_in;
  while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r' || hex.back() == ' ')) hex.pop_back();
  EpUniqueId id;
  if (hex.size() != id.bytes.size() * 2)
    throw InvalidArgument("unique id", std::to_string(id.bytes.size() * 2) + " hex digits",
                          std::to_string(hex.size()) + " characters");
  for (size_t i = 0; i < id.bytes.size(); ++i) {
    const int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) throw InvalidArgument("unique id", "hex digits", "'" + hex.substr(2 * i, 2) + "'");
    id.bytes[i] = static_cast<char>((hi << 4) | lo);
  }
  return id;
}

// ---------------------------------------------------------------------------------------------

struct ExpertParallelLayer::Impl {
  std::shared_ptr<Transport> transport;
  std::unique_ptr<ep::Engine> engine;
  LayerConfig config;
  EpConfig ep;
  std::unique_ptr<Layer> layer;
  std::vector<int32_t> local;  // global ids owned here
  int rank = 0, world = 1;
  int64_t cap = 0;  // rows of every send / receive array: world * max_tokens
  size_t xrow = 0;  // bytes of a dispatched hidden row
  size_t orow = 0;  // bytes of a partial / output row
  int64_t groups = 0;
  // engine memory
  std::vector<void*> allocations;
  int32_t* owner = nullptr;   // [E]
  int32_t* emap = nullptr;    // [E] global -> local id or -1
  int32_t* counts = nullptr;  // [2 * world]: send counts, then received counts
  int32_t* pos = nullptr;     // [max_tokens, world]
  void* send_x = nullptr;
  float* send_scale = nullptr;
  int32_t* send_ids = nullptr;
  float* send_w = nullptr;
  void* recv_x = nullptr;
  float* recv_scale = nullptr;
  int32_t* recv_ids = nullptr;
  float* recv_w = nullptr;
  void* partial = nullptr;       // [cap, K] local experts' output on the received rows
  void* combine_recv = nullptr;  // [cap, K] partial rows returned to this (home) rank
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  // host copies of the counts / offsets of the call in flight
  std::vector<int32_t> h_counts;
  std::vector<int64_t> send_off, send_cnt, recv_off, recv_cnt;
  int64_t received = 0;  // rows the local experts run on
  int stage = 0;         // 0 idle, 1 dispatched, 2 computed
  int64_t cur_M = -1;
  EpStats stats;

  void* alloc(size_t bytes) {
    void* p = engine->alloc(bytes);
    allocations.push_back(p);
    return p;
  }
  ~Impl() {
    if (engine)
      for (void* p : allocations) engine->release(p);
  }

  ep::Plan plan(const EpRunArgs& a) const {
    ep::Plan p;
    p.world = world;
    p.rank = rank;
    p.M = a.hidden_states.shape[0];
    p.K = ep.hidden;
    p.topk = ep.topk;
    p.E = ep.num_global_experts;
    p.max_tokens = ep.max_tokens_per_rank;
    p.padded = ep.mode == EpMode::PADDED;
    p.owner = owner;
    p.x = a.hidden_states.data;
    p.x_dtype = ep.hidden_dtype;
    p.ids = a.topk_ids.ptr<const int32_t>();
    p.weights = a.topk_weights.ptr<const float>();
    p.send_counts = counts;
    p.pos = pos;
    p.fp8 = ep.fp8_dispatch;
    p.ue8m0 = config.fp8_block_ue8m0;
    p.send_x = send_x;
    p.send_scale = send_scale;
    p.send_ids = send_ids;
    p.send_w = send_w;
    p.send_capacity = cap;
    p.combine_recv = combine_recv;
    p.out = a.output.data;
    return p;
  }

  void check_args(const EpRunArgs& a) const {
    const DeviceType dev = transport->device();
    auto check = [&](const TensorView& v, const char* name, DType dt, int64_t cols) {
      if (v.ndim != 2) throw InvalidArgument(name, "a 2-D tensor", "ndim " + std::to_string(v.ndim));
      if (v.dtype != dt) throw InvalidArgument(name, std::string("dtype ") + dtype_name(dt), dtype_name(v.dtype));
      const int64_t M = a.hidden_states.shape[0];
      if (v.shape[0] != M || v.shape[1] != cols)
        throw InvalidArgument(name, "shape [" + std::to_string(M) + "," + std::to_string(cols) + "]", v.shape_str());
      if (!v.is_contiguous()) throw InvalidArgument(name, "a contiguous tensor", "strides not row-major");
      if (M > 0 && v.data == nullptr) throw InvalidArgument(name, "data", "null");
      if (M > 0 && v.device != dev)
        throw InvalidArgument(name, dev == DeviceType::CUDA ? "CUDA memory (the transport's)" : "host memory",
                              v.device == DeviceType::CUDA ? "CUDA memory" : "host memory");
    };
    if (a.hidden_states.ndim != 2)
      throw InvalidArgument("hidden_states", "a 2-D tensor [M, K]", "ndim " + std::to_string(a.hidden_states.ndim));
    const int64_t M = a.hidden_states.shape[0];
    if (M < 0 || M > ep.max_tokens_per_rank)
      throw InvalidArgument("hidden_states", "M <= max_tokens_per_rank " + std::to_string(ep.max_tokens_per_rank),
                            std::to_string(M));
    check(a.hidden_states, "hidden_states", ep.hidden_dtype, ep.hidden);
    check(a.topk_ids, "topk_ids", DType::I32, ep.topk);
    check(a.topk_weights, "topk_weights", DType::F32, ep.topk);
    check(a.output, "output", ep.hidden_dtype, ep.hidden);
  }
};

ExpertParallelLayer::ExpertParallelLayer(std::shared_ptr<Transport> transport, const LayerConfig& config,
                                         const LayerWeights& local_weights, const EpConfig& epc,
                                         const LayerOptions& options)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  if (!transport) throw InvalidArgument("transport", "a Transport", "null");
  s.transport = std::move(transport);
  s.config = config;
  s.ep = epc;
  s.rank = s.transport->rank();
  s.world = s.transport->world();
  const int64_t E = epc.num_global_experts, K = epc.hidden;
  if (E < 1) throw InvalidArgument("num_global_experts", ">= 1", std::to_string(E));
  if (K < 1) throw InvalidArgument("hidden", ">= 1", std::to_string(K));
  if (epc.topk < 1) throw InvalidArgument("topk", ">= 1", std::to_string(epc.topk));
  if (epc.max_tokens_per_rank < 0)
    throw InvalidArgument("max_tokens_per_rank", ">= 0", std::to_string(epc.max_tokens_per_rank));
  if (epc.hidden_dtype != DType::F32 && epc.hidden_dtype != DType::F16 && epc.hidden_dtype != DType::BF16)
    throw InvalidArgument("hidden_dtype", "F32, F16 or BF16", dtype_name(epc.hidden_dtype));
  if (s.ep.expert_owner.empty()) s.ep.expert_owner = contiguous_expert_owner(E, s.world);
  if (static_cast<int64_t>(s.ep.expert_owner.size()) != E)
    throw InvalidArgument("expert_owner", std::to_string(E) + " entries", std::to_string(s.ep.expert_owner.size()));
  for (int64_t e = 0; e < E; ++e)
    if (s.ep.expert_owner[e] < 0 || s.ep.expert_owner[e] >= s.world)
      throw InvalidArgument("expert_owner[" + std::to_string(e) + "]", "a rank in [0, " + std::to_string(s.world) + ")",
                            std::to_string(s.ep.expert_owner[e]));
  s.local = owned_experts(s.ep.expert_owner, s.rank);
  if (epc.fp8_dispatch) {
    if (config.format != Format::FP8_BLOCK)
      throw InvalidArgument("fp8_dispatch", "an fp8-block layer", format_name(config.format));
    if (epc.apply_router_weight_on_input)
      throw InvalidArgument("fp8_dispatch", "apply_router_weight_on_input off (pre-quantised inputs refuse it)", "on");
  }

  // The local layer (none when this rank owns no expert).
  if (!s.local.empty()) {
    s.layer = std::make_unique<Layer>(config, local_weights, options);
    if (s.layer->num_experts() != static_cast<int64_t>(s.local.size()))
      throw InvalidArgument("local_weights",
                            std::to_string(s.local.size()) + " experts (owned by rank " + std::to_string(s.rank) + ")",
                            std::to_string(s.layer->num_experts()));
    if (s.layer->hidden() != K)
      throw InvalidArgument("local_weights", "hidden " + std::to_string(K), std::to_string(s.layer->hidden()));
    const bool cuda = s.layer->backend() == Backend::CUDA;
    if (cuda != (s.transport->device() == DeviceType::CUDA))
      throw InvalidArgument("local_weights",
                            cuda ? "host weights for a host transport" : "CUDA weights for a CUDA transport",
                            backend_name(s.layer->backend()));
  }
  if (s.transport->device() == DeviceType::CUDA && s.world > ep::kMaxDeviceWorld)
    throw NotImplemented("fusedmoe EP: at most " + std::to_string(ep::kMaxDeviceWorld) + " CUDA ranks, got " +
                         std::to_string(s.world));
  s.engine = s.transport->device() == DeviceType::CUDA ? ep::make_device_engine(s.transport->device_index())
                                                       : ep::make_host_engine();

  // Buffers, sized once. A rank receives at most max_tokens rows from each peer (each token goes
  // once to each rank) and sends at most max_tokens rows to each.
  s.cap = static_cast<int64_t>(s.world) * epc.max_tokens_per_rank;
  s.groups = (K + kFp8BlockSize - 1) / kFp8BlockSize;
  s.xrow = epc.fp8_dispatch ? static_cast<size_t>(K) : static_cast<size_t>(K) * dtype_size(epc.hidden_dtype);
  s.orow = static_cast<size_t>(K) * dtype_size(epc.hidden_dtype);
  const size_t cap = static_cast<size_t>(s.cap), topk = static_cast<size_t>(epc.topk);
  s.owner = static_cast<int32_t*>(s.alloc(static_cast<size_t>(E) * 4));
  s.emap = static_cast<int32_t*>(s.alloc(static_cast<size_t>(E) * 4));
  s.counts = static_cast<int32_t*>(s.alloc(2 * static_cast<size_t>(s.world) * 4));
  s.pos = static_cast<int32_t*>(s.alloc(static_cast<size_t>(epc.max_tokens_per_rank) * s.world * 4));
  s.send_x = s.alloc(cap * s.xrow);
  s.recv_x = s.alloc(cap * s.xrow);
  if (epc.fp8_dispatch) {
    s.send_scale = static_cast<float*>(s.alloc(cap * s.groups * 4));
    s.recv_scale = static_cast<float*>(s.alloc(cap * s.groups * 4));
  }
  s.send_ids = static_cast<int32_t*>(s.alloc(cap * topk * 4));
  s.recv_ids = static_cast<int32_t*>(s.alloc(cap * topk * 4));
  s.send_w = static_cast<float*>(s.alloc(cap * topk * 4));
  s.recv_w = static_cast<float*>(s.alloc(cap * topk * 4));
  s.partial = s.alloc(cap * s.orow);
  s.combine_recv = s.alloc(cap * s.orow);
  if (s.layer && s.cap > 0) {
    s.workspace_bytes = s.layer->workspace_size(s.cap, epc.topk);
    if (s.workspace_bytes) s.workspace = s.alloc(s.workspace_bytes);
  }
  std::vector<int32_t> emap(static_cast<size_t>(E), -1);
  for (size_t i = 0; i < s.local.size(); ++i) emap[s.local[i]] = static_cast<int32_t>(i);
  s.engine->upload(s.owner, s.ep.expert_owner.data(), static_cast<size_t>(E) * 4);
  s.engine->upload(s.emap, emap.data(), static_cast<size_t>(E) * 4);
  s.h_counts.assign(2 * static_cast<size_t>(s.world), 0);
  s.send_off.assign(s.world, 0);
  s.send_cnt.assign(s.world, 0);
  s.recv_off.assign(s.world, 0);
  s.recv_cnt.assign(s.world, 0);
}

ExpertParallelLayer::~ExpertParallelLayer() = default;
ExpertParallelLayer::ExpertParallelLayer(ExpertParallelLayer&&) noexcept = default;
ExpertParallelLayer& ExpertParallelLayer::operator=(ExpertParallelLayer&&) noexcept = default;

int ExpertParallelLayer::rank() const { return impl_->rank; }
int ExpertParallelLayer::world() const { return impl_->world; }
int64_t ExpertParallelLayer::num_local_experts() const { return static_cast<int64_t>(impl_->local.size()); }
const std::vector<int32_t>& ExpertParallelLayer::local_experts() const { return impl_->local; }
const EpConfig& ExpertParallelLayer::config() const { return impl_->ep; }
const Layer* ExpertParallelLayer::local_layer() const { return impl_->layer.get(); }
EpStats ExpertParallelLayer::last_stats() const { return impl_->stats; }

void ExpertParallelLayer::warmup(void* stream) const {
  if (impl_->layer && impl_->cap > 0) impl_->layer->warmup(impl_->cap, impl_->ep.topk, stream);
}

void ExpertParallelLayer::dispatch(const EpRunArgs& a) {
  Impl& s = *impl_;
  s.check_args(a);
  const ep::Plan p = s.plan(a);
  const int G = s.world;
  s.engine->route(p, a.stream);
  s.engine->pack(p, a.stream);
  EpStats st;
  st.tokens = p.M;
  if (s.ep.mode == EpMode::EXACT) {
    // NCCL's send/recv sizes are host values: exchange the counts on the device, then one copy to
    // the host and a stream synchronisation (documented in docs/EXPERT_PARALLEL.md).
    s.transport->exchange_counts(s.counts, s.counts + G, a.stream);
    s.engine->download_sync(s.h_counts.data(), s.counts, 2 * static_cast<size_t>(G) * 4, a.stream);
    int64_t so = 0, ro = 0;
    for (int d = 0; d < G; ++d) {
      s.send_cnt[d] = s.h_counts[d];
      s.recv_cnt[d] = s.h_counts[G + d];
      s.send_off[d] = so;
      s.recv_off[d] = ro;
      so += s.send_cnt[d];
      ro += s.recv_cnt[d];
    }
    s.received = ro;
    st.sent_rows = so;
    st.sent_rows_remote = so - s.send_cnt[s.rank];
    st.host_synced = true;
  } else {
    for (int d = 0; d < G; ++d) {
      s.send_cnt[d] = s.recv_cnt[d] = s.ep.max_tokens_per_rank;
      s.send_off[d] = s.recv_off[d] = static_cast<int64_t>(d) * s.ep.max_tokens_per_rank;
    }
    s.received = s.cap;
    st.sent_rows = s.cap;
    st.sent_rows_remote = s.cap - s.ep.max_tokens_per_rank;
  }
  const size_t row_bytes_total =
      s.xrow + (s.ep.fp8_dispatch ? static_cast<size_t>(s.groups) * 4 : 0) + static_cast<size_t>(s.ep.topk) * 8;
  st.received_rows = s.received;
  st.dispatch_bytes_remote = static_cast<size_t>(st.sent_rows_remote) * row_bytes_total;
  std::vector<EpField> fields;
  fields.push_back({s.send_x, s.recv_x, s.xrow});
  if (s.ep.fp8_dispatch) fields.push_back({s.send_scale, s.recv_scale, static_cast<size_t>(s.groups) * 4});
  fields.push_back({s.send_ids, s.recv_ids, static_cast<size_t>(s.ep.topk) * 4});
  fields.push_back({s.send_w, s.recv_w, static_cast<size_t>(s.ep.topk) * 4});
  s.transport->alltoallv(fields.data(), static_cast<int>(fields.size()), s.send_off.data(), s.send_cnt.data(),
                         s.recv_off.data(), s.recv_cnt.data(), a.stream);
  s.stats = st;
  s.stage = 1;
  s.cur_M = p.M;
}

void ExpertParallelLayer::compute(const EpRunArgs& a) {
  Impl& s = *impl_;
  if (s.stage != 1) throw Error("fusedmoe EP: compute() needs a dispatch() first");
  const int64_t R = s.received;
  if (R > 0) {
    if (!s.layer) {
      s.engine->zero(s.partial, static_cast<size_t>(R) * s.orow, a.stream);
    } else {
      const DeviceType dev = s.transport->device();
      const int di = s.transport->device_index();
      const int64_t K = s.ep.hidden, topk = s.ep.topk, E = s.ep.num_global_experts;
      RunArgs ra;
      if (s.ep.fp8_dispatch) {
        ra.hidden_states = TensorView::contiguous(s.recv_x, DType::F8_E4M3, {R, K}, dev, di);
        ra.hidden_states_scale = TensorView::contiguous(s.recv_scale, DType::F32, {R, s.groups}, dev, di);
      } else {
        ra.hidden_states = TensorView::contiguous(s.recv_x, s.ep.hidden_dtype, {R, K}, dev, di);
      }
      ra.topk_ids = TensorView::contiguous(s.recv_ids, DType::I32, {R, topk}, dev, di);
      ra.topk_weights = TensorView::contiguous(s.recv_w, DType::F32, {R, topk}, dev, di);
      ra.expert_map = TensorView::contiguous(s.emap, DType::I32, {E}, dev, di);
      ra.output = TensorView::contiguous(s.partial, s.ep.hidden_dtype, {R, K}, dev, di);
      ra.apply_router_weight_on_input = s.ep.apply_router_weight_on_input;
      ra.workspace = s.workspace;
      ra.workspace_bytes = s.workspace_bytes;
      ra.stream = a.stream;
      s.layer->run(ra);
    }
  }
  s.stage = 2;
}

void ExpertParallelLayer::combine(const EpRunArgs& a) {
  Impl& s = *impl_;
  if (s.stage != 2) throw Error("fusedmoe EP: combine() needs dispatch() and compute() first");
  if (a.hidden_states.ndim != 2 || a.hidden_states.shape[0] != s.cur_M)
    throw InvalidArgument("hidden_states", "the tokens of the dispatch (M = " + std::to_string(s.cur_M) + ")",
                          a.hidden_states.shape_str());
  s.check_args(a);
  // Partial rows go back the way the tokens came: this rank's received block of source s returns
  // to s, and lands where s keeps the rows it sent here.
  EpField f{s.partial, s.combine_recv, s.orow};
  s.transport->alltoallv(&f, 1, s.recv_off.data(), s.recv_cnt.data(), s.send_off.data(), s.send_cnt.data(), a.stream);
  s.stats.combine_bytes_remote = static_cast<size_t>(s.received - s.recv_cnt[s.rank]) * s.orow;
  const ep::Plan p = s.plan(a);
  s.engine->combine(p, a.stream);
  s.stage = 0;
}

void ExpertParallelLayer::run(const EpRunArgs& a) {
  dispatch(a);
  // A local failure (e.g. the local layer refusing a problem) must not leave the peers waiting in
  // combine: send zero partials, finish the collective, then report the error.
  std::exception_ptr error;
  try {
    compute(a);
  } catch (...) {
    error = std::current_exception();
    Impl& s = *impl_;
    if (s.received > 0) s.engine->zero(s.partial, static_cast<size_t>(s.received) * s.orow, a.stream);
    s.stage = 2;
  }
  combine(a);
  if (error) std::rethrow_exception(error);
}

}  // namespace fusedmoe
