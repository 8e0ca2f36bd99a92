// fusedmoe-ep-bench: the expert-parallel layer over NCCL on 1..G GPUs of this machine (one
// thread per GPU, run_on_gpus).
//
//  * NCCL all-to-all bandwidth of these GPUs: ncclSend/ncclRecv between all pairs (one group),
//    per-peer sizes --a2a-mb, reported as bytes each rank sends to the other ranks / time;
//  * per token count M (per rank): dispatch, compute (local experts), combine and the whole layer
//    (median of --reps after --warmup, slowest rank), dispatch and combine bandwidth (bytes sent to
//    other ranks / time) next to the NCCL all-to-all of the same per-peer volume measured right
//    after on the same GPUs, and at G = 1 the plain single-GPU Layer::run for reference.
//
// Layer: DeepSeek-V3 routed experts by default (E = 256, top-8, K = 7168, N = 2048), fp8-block
// when the build runs it (else bf16), random weights generated on the GPU, uniform random routing
// (distinct experts per token), each rank holding E/G contiguous experts.
//
//   fusedmoe-ep-bench [--gpus 1,2,4] [--tokens 64,512,4096] [--format auto|bf16|fp8-block]
//                     [--mode exact|padded|both] [--fp8-dispatch on|off|both]
//                     [--padded-max per-m|largest] [--reps 30]
//                     [--warmup 5] [--a2a-mb 1,8,64] [--experts 256 --topk 8 --hidden 7168
//                     --inter 2048] [--out DIR]
// Writes DIR/ep_bench.csv, DIR/ep_a2a.csv and DIR/ep_bench.json (default DIR: .).
//
// One process per GPU (one or several machines, NCCL's own bootstrap) instead of one thread per
// GPU: start W processes with --world W --rank R --id-file F [--device D] (F on a file system they
// all see: rank 0 writes the NCCL unique id there, the others wait for it; D defaults to R modulo
// the GPUs of the machine). Each process reports its own rank (files *_rankR.*).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <chrono>
#include <vector>

#include "kernels.hpp"
#include "fusedmoe/fusedmoe.hpp"

using namespace fusedmoe;

namespace {

void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string(what) + ": " + cudaGetErrorString(e));
}

struct DevBuf {
  void* p = nullptr;
  size_t n = 0;
  DevBuf() = default;
  explicit DevBuf(size_t bytes) : n(bytes) { ck(cudaMalloc(&p, bytes ? bytes : 16), "cudaMalloc"); }
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) v.push_back(std::stoll(item));
  return v;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

struct Opts {
  std::vector<int64_t> gpus, tokens = {64, 512, 4096}, a2a_mb = {1, 8, 64};
  std::string format = "auto", mode = "exact", fp8_dispatch = "both", out = ".";
  std::string padded_max = "per-m";  // PADDED capacity: per-m (each M its own layer) | largest
  int reps = 30, warmup = 5;
  int world = 0, rank = 0, device = -1;  // multi-process mode (--id-file)
  std::string id_file;
  int64_t E = 256, topk = 8, K = 7168, N = 2048;
};

struct Row {  // one rank's medians for one configuration
  int world = 1, rank = 0;
  std::string format, mode;
  bool fp8_dispatch = false;
  int64_t M = 0, capacity = 0, received_rows = 0;  // capacity: the layer's max_tokens_per_rank
  double dispatch_ms = 0, compute_ms = 0, combine_ms = 0, total_ms = 0, single_ms = 0;
  double dispatch_bytes = 0, combine_bytes = 0, a2a_same_dispatch_ms = 0, a2a_same_combine_ms = 0;
  double a2a_dispatch_bytes = 0, a2a_combine_bytes = 0;  // what the same-volume all-to-all sent to peers
};
struct A2aRow {
  int world = 1, rank = 0;
  double bytes_per_peer = 0, ms = 0;
};

std::mutex g_mu;
std::vector<Row> g_rows;
std::vector<A2aRow> g_a2a;

// The median time of an all-pairs exchange of `bytes_per_peer` bytes (one NCCL group).
double time_a2a(Transport& tr, size_t bytes_per_peer, int reps, int warmup, cudaStream_t st) {
  const int G = tr.world();
  if (G == 1 || bytes_per_peer == 0) return 0;
  DevBuf s(bytes_per_peer * G), r(bytes_per_peer * G);
  ck(cudaMemset(s.p, 1, s.n), "cudaMemset");
  std::vector<int64_t> off(G), cnt(G, 1);
  for (int d = 0; d < G; ++d) off[d] = d;
  EpField f{s.p, r.p, bytes_per_peer};
  cudaEvent_t e0, e1;
  ck(cudaEventCreate(&e0), "cudaEventCreate");
  ck(cudaEventCreate(&e1), "cudaEventCreate");
  std::vector<double> t;
  for (int i = 0; i < warmup + reps; ++i) {
    tr.barrier(st);
    ck(cudaEventRecord(e0, st), "cudaEventRecord");
    tr.alltoallv(&f, 1, off.data(), cnt.data(), off.data(), cnt.data(), st);
    ck(cudaEventRecord(e1, st), "cudaEventRecord");
    ck(cudaEventSynchronize(e1), "cudaEventSynchronize");
    float ms = 0;
    ck(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
    if (i >= warmup) t.push_back(ms);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return median(t);
}

// This rank's experts of the benchmark layer, generated on the GPU.
struct BenchWeights {
  std::vector<std::unique_ptr<DevBuf>> bufs;
  LayerWeights w;
  TensorView put(size_t bytes, DType dt, std::initializer_list<int64_t> shape, int dev) {
    bufs.push_back(std::make_unique<DevBuf>(bytes));
    return TensorView::contiguous(bufs.back()->p, dt, shape, DeviceType::CUDA, dev);
  }
};

std::unique_ptr<BenchWeights> make_weights(Format f, int64_t El, int64_t K, int64_t N, int dev, uint64_t seed,
                                           cudaStream_t st) {
  auto bw = std::make_unique<BenchWeights>();
  const size_t w13n = static_cast<size_t>(El * 2 * N * K), w2n = static_cast<size_t>(El * K * N);
  if (f == Format::FP8_BLOCK) {
    bw->w.w13_weight = bw->put(w13n, DType::F8_E4M3, {El, 2 * N, K}, dev);
    bw->w.w2_weight = bw->put(w2n, DType::F8_E4M3, {El, K, N}, dev);
    const int64_t a = (2 * N + 127) / 128, b = (K + 127) / 128, c = (N + 127) / 128;
    bw->w.w13_weight_scale = bw->put(static_cast<size_t>(El * a * b) * 4, DType::F32, {El, a, b}, dev);
    bw->w.w2_weight_scale = bw->put(static_cast<size_t>(El * b * c) * 4, DType::F32, {El, b, c}, dev);
    fmbench::gen_uniform(bw->w.w13_weight.data, DType::F8_E4M3, w13n, seed, -448.0f, 448.0f, st);
    fmbench::gen_uniform(bw->w.w2_weight.data, DType::F8_E4M3, w2n, seed + 1, -448.0f, 448.0f, st);
    // Constant block scales (an empty range [v, v) gives v everywhere).
    const float s13 = 1.0f / (448.0f * 50.0f), s2 = 1.0f / (448.0f * 30.0f);
    fmbench::gen_uniform(bw->w.w13_weight_scale.data, DType::F32, static_cast<size_t>(El * a * b), 0, s13, s13, st);
    fmbench::gen_uniform(bw->w.w2_weight_scale.data, DType::F32, static_cast<size_t>(El * b * c), 0, s2, s2, st);
  } else {
    bw->w.w13_weight = bw->put(w13n * 2, DType::BF16, {El, 2 * N, K}, dev);
    bw->w.w2_weight = bw->put(w2n * 2, DType::BF16, {El, K, N}, dev);
    fmbench::gen_uniform(bw->w.w13_weight.data, DType::BF16, w13n, seed, -0.02f, 0.02f, st);
    fmbench::gen_uniform(bw->w.w2_weight.data, DType::BF16, w2n, seed + 1, -0.03f, 0.03f, st);
  }
  ck(cudaGetLastError(), "fill kernels");
  ck(cudaStreamSynchronize(st), "cudaStreamSynchronize");
  return bw;
}

Format pick_format(const Opts& o, int device) {
  if (o.format == "bf16") return Format::BF16;
  if (o.format == "fp8-block") return Format::FP8_BLOCK;
  // auto: fp8-block when this build runs it (a one-expert probe), else bf16.
  ck(cudaSetDevice(device), "cudaSetDevice");
  cudaStream_t st = nullptr;
  auto bw = make_weights(Format::FP8_BLOCK, 1, o.K, o.N, device, 1, st);
  LayerConfig c;
  c.format = Format::FP8_BLOCK;
  Layer l(c, bw->w);
  Problem p;
  p.num_tokens = 64;
  p.hidden = o.K;
  p.inter = o.N;
  p.num_experts = p.num_global_experts = 1;
  p.topk = 1;
  const Support s = l.can_implement(p);
  if (!s.ok) std::fprintf(stderr, "ep-bench: fp8-block not available (%s): bf16\n", s.reason.c_str());
  return s.ok ? Format::FP8_BLOCK : Format::BF16;
}

// Every rank finishes its allocations (a layer's buffers, Layer::warmup's scratch) and meets the
// others at a fusedmoe::HostBarrier before it launches the next collectives (see ep.hpp: a CUDA
// allocation or free can wait on a device whose NCCL kernel spins waiting for this rank).

void bench_rank(const Opts& o, Format fmt, int rank, std::shared_ptr<Transport> tr, HostBarrier& barrier) {
  const int G = tr->world();
  cudaStream_t st = nullptr;
  ck(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
  // 1. NCCL all-to-all bandwidth.
  for (int64_t mb : o.a2a_mb) {
    if (G == 1) break;
    const size_t bytes = static_cast<size_t>(mb) << 20;
    A2aRow a{G, rank, static_cast<double>(bytes), time_a2a(*tr, bytes, o.reps, o.warmup, st)};
    std::lock_guard<std::mutex> lk(g_mu);
    g_a2a.push_back(a);
  }
  // 2. The layer.
  const int64_t El = o.E / G, K = o.K, topk = o.topk;
  auto bw = make_weights(fmt, El, K, o.N, rank, 1000 + rank, st);
  LayerConfig cfg;
  cfg.format = fmt;
  const int64_t maxM = *std::max_element(o.tokens.begin(), o.tokens.end());
  DevBuf x(static_cast<size_t>(maxM * K) * 2), out(static_cast<size_t>(maxM * K) * 2);
  DevBuf ids(static_cast<size_t>(maxM * topk) * 4), wts(static_cast<size_t>(maxM * topk) * 4);
  fmbench::gen_uniform(x.p, DType::BF16, static_cast<size_t>(maxM * K), 77 + rank, -1.0f, 1.0f, st);
  {
    std::mt19937_64 rng(1234 + rank);
    std::vector<int32_t> h_ids(static_cast<size_t>(maxM * topk)), perm(static_cast<size_t>(o.E));
    std::vector<float> h_w(h_ids.size());
    std::uniform_real_distribution<float> ud(0.05f, 0.3f);
    for (int64_t t = 0; t < maxM; ++t) {
      for (int64_t e = 0; e < o.E; ++e) perm[e] = static_cast<int32_t>(e);
      for (int64_t k = 0; k < topk; ++k) {  // partial Fisher-Yates: distinct experts
        std::swap(perm[k], perm[k + rng() % (o.E - k)]);
        h_ids[t * topk + k] = perm[k];
        h_w[t * topk + k] = ud(rng);
      }
    }
    ck(cudaMemcpy(ids.p, h_ids.data(), h_ids.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    ck(cudaMemcpy(wts.p, h_w.data(), h_w.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  std::vector<EpMode> modes;
  if (o.mode == "exact" || o.mode == "both") modes.push_back(EpMode::EXACT);
  if (o.mode == "padded" || o.mode == "both") modes.push_back(EpMode::PADDED);
  std::vector<bool> fp8s;
  if (fmt == Format::FP8_BLOCK && (o.fp8_dispatch == "on" || o.fp8_dispatch == "both")) fp8s.push_back(true);
  if (fmt != Format::FP8_BLOCK || o.fp8_dispatch == "off" || o.fp8_dispatch == "both") fp8s.push_back(false);
  cudaEvent_t ev[4];
  for (auto& e : ev) ck(cudaEventCreate(&e), "cudaEventCreate");
  // PADDED mode moves max_tokens_per_rank rows to every peer and runs the local experts on all of
  // them whatever M is, so by default each M gets a layer sized to it, as a deployment sizes its
  // decode layer to its batch (--padded-max largest: one layer sized to the largest M). EXACT
  // moves only the real rows: one layer sized to the largest M serves every M.
  struct Group {
    int64_t capacity;
    std::vector<int64_t> tokens;
  };
  for (EpMode mode : modes)
    for (bool fp8 : fp8s) {
      std::vector<Group> groups;
      if (mode == EpMode::PADDED && o.padded_max == "per-m")
        for (int64_t M : o.tokens) groups.push_back({M, {M}});
      else
        groups.push_back({maxM, o.tokens});
      for (const Group& grp : groups) {
        EpConfig ec;
        ec.num_global_experts = o.E;
        ec.hidden = K;
        ec.topk = topk;
        ec.max_tokens_per_rank = grp.capacity;
        ec.mode = mode;
        ec.fp8_dispatch = fp8;
        ExpertParallelLayer ep(tr, cfg, bw->w, ec);
        // Layer::warmup allocates, frees and synchronises: part of the set-up, before the barrier.
        ep.warmup(st);
        ck(cudaStreamSynchronize(st), "warmup");
        ck(cudaDeviceSynchronize(), "set-up");
        barrier.wait();
        for (int64_t M : grp.tokens) {
          EpRunArgs a;
          a.hidden_states = TensorView::contiguous(x.p, DType::BF16, {M, K}, DeviceType::CUDA, rank);
          a.topk_ids = TensorView::contiguous(ids.p, DType::I32, {M, topk}, DeviceType::CUDA, rank);
          a.topk_weights = TensorView::contiguous(wts.p, DType::F32, {M, topk}, DeviceType::CUDA, rank);
          a.output = TensorView::contiguous(out.p, DType::BF16, {M, K}, DeviceType::CUDA, rank);
          a.stream = st;
          std::vector<double> td, tc, tm, tt;
          for (int i = 0; i < o.warmup + o.reps; ++i) {
            tr->barrier(st);
            ck(cudaEventRecord(ev[0], st), "rec");
            ep.dispatch(a);
            ck(cudaEventRecord(ev[1], st), "rec");
            ep.compute(a);
            ck(cudaEventRecord(ev[2], st), "rec");
            ep.combine(a);
            ck(cudaEventRecord(ev[3], st), "rec");
            ck(cudaEventSynchronize(ev[3]), "sync");
            float a01, a12, a23, a03;
            cudaEventElapsedTime(&a01, ev[0], ev[1]);
            cudaEventElapsedTime(&a12, ev[1], ev[2]);
            cudaEventElapsedTime(&a23, ev[2], ev[3]);
            cudaEventElapsedTime(&a03, ev[0], ev[3]);
            if (i >= o.warmup) {
              td.push_back(a01);
              tc.push_back(a12);
              tm.push_back(a23);
              tt.push_back(a03);
            }
          }
          const EpStats s = ep.last_stats();
          Row r;
          r.world = G;
          r.rank = rank;
          r.format = format_name(fmt);
          r.mode = ep_mode_name(mode);
          r.fp8_dispatch = fp8;
          r.M = M;
          r.capacity = grp.capacity;
          r.received_rows = s.received_rows;
          r.dispatch_ms = median(td);
          r.compute_ms = median(tc);
          r.combine_ms = median(tm);
          r.total_ms = median(tt);
          r.dispatch_bytes = static_cast<double>(s.dispatch_bytes_remote);
          r.combine_bytes = static_cast<double>(s.combine_bytes_remote);
          if (G > 1) {
            // NCCL all-to-all of the same per-peer volume (mean over peers), same GPUs, right now.
            // Every rank must call it with the same size: the expected per-peer volume of a uniformly
            // routed rank (identical on all ranks for equal M; PADDED: the fixed padded volume).
            const size_t row = fp8 ? static_cast<size_t>(K + (K + 127) / 128 * 4) : static_cast<size_t>(K) * 2;
            const double p_rank = 1.0 - std::pow(1.0 - 1.0 / G, static_cast<double>(topk));  // P(token -> rank)
            const size_t per_peer_d =
                static_cast<size_t>(mode == EpMode::PADDED ? static_cast<double>(grp.capacity) : p_rank * M) * (row + topk * 8);
            const size_t per_peer_c =
                static_cast<size_t>(mode == EpMode::PADDED ? static_cast<double>(grp.capacity) : p_rank * M) * K * 2;
            r.a2a_same_dispatch_ms = time_a2a(*tr, per_peer_d, o.reps, o.warmup, st);
            r.a2a_same_combine_ms = time_a2a(*tr, per_peer_c, o.reps, o.warmup, st);
            r.a2a_dispatch_bytes = static_cast<double>(per_peer_d) * (G - 1);
            r.a2a_combine_bytes = static_cast<double>(per_peer_c) * (G - 1);
          }
          if (G == 1 && ep.local_layer()) {
            // The plain single-GPU layer on the same tokens (no EP machinery).
            const Layer& l = *ep.local_layer();
            DevBuf ws(l.workspace_size(M, topk));
            RunArgs ra;
            ra.hidden_states = a.hidden_states;
            ra.topk_ids = a.topk_ids;
            ra.topk_weights = a.topk_weights;
            ra.output = a.output;
            ra.workspace = ws.p;
            ra.workspace_bytes = ws.n;
            ra.stream = st;
            std::vector<double> ts;
            for (int i = 0; i < o.warmup + o.reps; ++i) {
              ck(cudaEventRecord(ev[0], st), "rec");
              l.run(ra);
              ck(cudaEventRecord(ev[1], st), "rec");
              ck(cudaEventSynchronize(ev[1]), "sync");
              float ms;
              cudaEventElapsedTime(&ms, ev[0], ev[1]);
              if (i >= o.warmup) ts.push_back(ms);
            }
            r.single_ms = median(ts);
          }
          std::lock_guard<std::mutex> lk(g_mu);
          g_rows.push_back(r);
        }
      }  // groups: the layer is freed here, after this rank's last collective with it
    }
  for (auto& e : ev) cudaEventDestroy(e);
  cudaStreamDestroy(st);
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ep-bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--gpus")
      o.gpus = parse_list(next());
    else if (a == "--tokens")
      o.tokens = parse_list(next());
    else if (a == "--a2a-mb")
      o.a2a_mb = parse_list(next());
    else if (a == "--format")
      o.format = next();
    else if (a == "--mode")
      o.mode = next();
    else if (a == "--fp8-dispatch")
      o.fp8_dispatch = next();
    else if (a == "--padded-max")
      o.padded_max = next();
    else if (a == "--reps")
      o.reps = std::stoi(next());
    else if (a == "--warmup")
      o.warmup = std::stoi(next());
    else if (a == "--experts")
      o.E = std::stoll(next());
    else if (a == "--topk")
      o.topk = std::stoll(next());
    else if (a == "--hidden")
      o.K = std::stoll(next());
    else if (a == "--inter")
      o.N = std::stoll(next());
    else if (a == "--out")
      o.out = next();
    else if (a == "--world")
      o.world = std::stoi(next());
    else if (a == "--rank")
      o.rank = std::stoi(next());
    else if (a == "--device")
      o.device = std::stoi(next());
    else if (a == "--id-file")
      o.id_file = next();
    else {
      std::fprintf(stderr,
                   "usage: fusedmoe-ep-bench [--gpus 1,2,4] [--tokens 64,512,4096] [--format auto|bf16|fp8-block]\n"
                   "  [--mode exact|padded|both] [--fp8-dispatch on|off|both] [--padded-max per-m|largest]\n"
                   "  [--reps N] [--warmup N]\n"
                   "  [--a2a-mb 1,8,64] [--experts E --topk k --hidden K --inter N] [--out DIR]\n"
                   "  [--world W --rank R --id-file F [--device D]]   (one process per GPU)\n");
      return 2;
    }
  }
  try {
    auto one_of = [](const std::string& opt, const std::string& v, std::initializer_list<const char*> ok) {
      std::string list;
      for (const char* x : ok) {
        if (v == x) return;
        list += (list.empty() ? "" : "|") + std::string(x);
      }
      throw InvalidArgument(opt, list, v);
    };
    one_of("--mode", o.mode, {"exact", "padded", "both"});
    one_of("--fp8-dispatch", o.fp8_dispatch, {"on", "off", "both"});
    one_of("--padded-max", o.padded_max, {"per-m", "largest"});
    if (!nccl_available()) throw NotImplemented("this build has no NCCL transport");
    int ndev = 0;
    ck(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount");
    if (!o.id_file.empty()) {
      // One process per GPU: NCCL's bootstrap from a unique id shared through a file.
      if (o.world < 1 || o.rank < 0 || o.rank >= o.world)
        throw InvalidArgument("--world/--rank", "0 <= rank < world", "");
      const int dev = o.device >= 0 ? o.device : o.rank % ndev;
      EpUniqueId id;
      if (o.rank == 0) {
        id = nccl_unique_id();
        const std::string tmp = o.id_file + ".tmp";
        std::ofstream(tmp) << id.to_hex() << "\n";
        if (std::rename(tmp.c_str(), o.id_file.c_str()) != 0) throw Error("cannot write " + o.id_file);
      } else {
        std::string hex;
        for (int i = 0; i < 3000 && hex.size() < 256; ++i) {
          std::ifstream f(o.id_file);
          if (!(f >> hex) || hex.size() < 256) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        id = EpUniqueId::from_hex(hex);
      }
      const Format fmt = pick_format(o, dev);
      auto tr = make_nccl_transport(id, o.world, o.rank, dev);
      std::fprintf(stderr, "ep-bench: rank %d of %d on cuda:%d\n", o.rank, o.world, dev);
      HostBarrier alone(1);  // one rank per process: no rank thread to wait for
      bench_rank(o, fmt, o.rank, tr, alone);
    } else {
      if (o.gpus.empty())
        for (int g = 1; g <= ndev; g *= 2) o.gpus.push_back(g);
      const Format fmt = pick_format(o, 0);
      for (int64_t G : o.gpus) {
        if (G > ndev) {
          std::fprintf(stderr, "ep-bench: skip %lld GPUs (have %d)\n", static_cast<long long>(G), ndev);
          continue;
        }
        if (o.E % G) {
          std::fprintf(stderr, "ep-bench: skip %lld GPUs (E = %lld not divisible)\n", static_cast<long long>(G),
                       static_cast<long long>(o.E));
          continue;
        }
        std::fprintf(stderr, "ep-bench: %lld GPU(s) ...\n", static_cast<long long>(G));
        HostBarrier barrier(static_cast<int>(G));
        run_on_gpus(static_cast<int>(G),
                    [&](int rank, std::shared_ptr<Transport> tr) { bench_rank(o, fmt, rank, tr, barrier); });
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ep-bench: %s\n", e.what());
    return 1;
  }

  // Aggregate over ranks: the layer's time is the slowest rank's; bandwidths are per rank means.
  nlohmann::json js;
  js["a2a"] = nlohmann::json::array();
  std::map<std::pair<int, double>, std::vector<double>> a2a;
  for (const auto& a : g_a2a) a2a[{a.world, a.bytes_per_peer}].push_back(a.ms);
  const std::string sfx = o.id_file.empty() ? "" : "_rank" + std::to_string(o.rank);
  std::ofstream ca(o.out + "/ep_a2a" + sfx + ".csv");
  ca << "gpus,bytes_per_peer,ms_max_rank,send_GBps_per_rank\n";
  std::printf("\nNCCL all-to-all (ncclSend/ncclRecv all pairs), bytes each rank sends to the others / time\n");
  std::printf("%5s %14s %10s %12s\n", "gpus", "bytes/peer", "ms", "GB/s/rank");
  for (const auto& [k, v] : a2a) {
    const double ms = *std::max_element(v.begin(), v.end());
    const double gbps = (k.first - 1) * k.second / (ms * 1e6);
    std::printf("%5d %14.0f %10.4f %12.1f\n", k.first, k.second, ms, gbps);
    ca << k.first << "," << k.second << "," << ms << "," << gbps << "\n";
    js["a2a"].push_back({{"gpus", k.first}, {"bytes_per_peer", k.second}, {"ms", ms}, {"send_GBps_per_rank", gbps}});
  }
  struct Agg {
    std::vector<Row> rows;
  };
  std::map<std::tuple<int, std::string, std::string, bool, int64_t, int64_t>, Agg> agg;
  for (const auto& r : g_rows) agg[{r.world, r.format, r.mode, r.fp8_dispatch, r.M, r.capacity}].rows.push_back(r);
  std::ofstream cb(o.out + "/ep_bench" + sfx + ".csv");
  cb << "gpus,format,mode,fp8_dispatch,M_per_rank,max_tokens_per_rank,layer_ms,dispatch_ms,compute_ms,combine_ms,single_gpu_layer_ms,"
        "dispatch_GBps,combine_GBps,nccl_a2a_same_volume_dispatch_GBps,nccl_a2a_same_volume_combine_GBps,"
        "dispatch_bytes_per_rank,combine_bytes_per_rank,max_received_rows\n";
  js["layer"] = nlohmann::json::array();
  std::printf(
      "\nExpert-parallel layer, E=%lld top-%lld K=%lld N=%lld (median of %d, slowest rank; GB/s = bytes to "
      "other ranks / time, mean over ranks; a2a = NCCL all-to-all of the same volume)\n",
      static_cast<long long>(o.E), static_cast<long long>(o.topk), static_cast<long long>(o.K),
      static_cast<long long>(o.N), o.reps);
  std::printf("%4s %-9s %-6s %4s %5s %5s | %9s %9s %9s %9s %9s | %8s %8s %8s %8s\n", "gpus", "format", "mode", "fp8d", "M", "cap",
              "layer_ms", "disp_ms", "comp_ms", "comb_ms", "1gpu_ms", "disp_GB/s", "a2a", "comb_GB/s", "a2a");
  for (const auto& [k, g] : agg) {
    auto mx = [&](double Row::*m) {
      double v = 0;
      for (const auto& r : g.rows) v = std::max(v, r.*m);
      return v;
    };
    auto bw = [&](double Row::*bytes, double Row::*ms) {
      double s = 0;
      for (const auto& r : g.rows) s += r.*ms > 0 ? r.*bytes / (r.*ms * 1e6) : 0;
      return s / g.rows.size();
    };
    auto a2a_bw = bw;  // same formula over the all-to-all's own bytes and time
    int64_t maxrecv = 0;
    for (const auto& r : g.rows) maxrecv = std::max(maxrecv, r.received_rows);
    const double d_bw = bw(&Row::dispatch_bytes, &Row::dispatch_ms), c_bw = bw(&Row::combine_bytes, &Row::combine_ms);
    const double d_a2a = a2a_bw(&Row::a2a_dispatch_bytes, &Row::a2a_same_dispatch_ms);
    const double c_a2a = a2a_bw(&Row::a2a_combine_bytes, &Row::a2a_same_combine_ms);
    const auto& [G, fmt, mode, fp8, M, cap] = k;
    std::printf("%4d %-9s %-6s %4s %5lld %5lld | %9.3f %9.3f %9.3f %9.3f %9.3f | %8.1f %8.1f %8.1f %8.1f\n", G,
                fmt.c_str(), mode.c_str(), fp8 ? "on" : "off", static_cast<long long>(M), static_cast<long long>(cap),
                mx(&Row::total_ms), mx(&Row::dispatch_ms),
                mx(&Row::compute_ms), mx(&Row::combine_ms), mx(&Row::single_ms), d_bw, d_a2a, c_bw, c_a2a);
    cb << G << "," << fmt << "," << mode << "," << (fp8 ? 1 : 0) << "," << M << "," << cap << "," << mx(&Row::total_ms) << ","
       << mx(&Row::dispatch_ms) << "," << mx(&Row::compute_ms) << "," << mx(&Row::combine_ms) << ","
       << mx(&Row::single_ms) << "," << d_bw << "," << c_bw << "," << d_a2a << "," << c_a2a << ","
       << mx(&Row::dispatch_bytes) << "," << mx(&Row::combine_bytes) << "," << maxrecv << "\n";
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& r : g.rows)
      ranks.push_back({{"rank", r.rank},
                       {"layer_ms", r.total_ms},
                       {"dispatch_ms", r.dispatch_ms},
                       {"compute_ms", r.compute_ms},
                       {"combine_ms", r.combine_ms},
                       {"dispatch_bytes", r.dispatch_bytes},
                       {"combine_bytes", r.combine_bytes},
                       {"received_rows", r.received_rows},
                       {"a2a_same_dispatch_ms", r.a2a_same_dispatch_ms},
                       {"a2a_same_combine_ms", r.a2a_same_combine_ms},
                       {"single_gpu_layer_ms", r.single_ms}});
    js["layer"].push_back({{"gpus", G},
                           {"format", fmt},
                           {"mode", mode},
                           {"fp8_dispatch", fp8},
                           {"M_per_rank", M},
                           {"max_tokens_per_rank", cap},
                           {"layer_ms", mx(&Row::total_ms)},
                           {"dispatch_GBps", d_bw},
                           {"combine_GBps", c_bw},
                           {"nccl_a2a_same_volume_dispatch_GBps", d_a2a},
                           {"nccl_a2a_same_volume_combine_GBps", c_a2a},
                           {"ranks", ranks}});
  }
  js["shape"] = {{"experts", o.E}, {"topk", o.topk}, {"hidden", o.K}, {"inter", o.N}};
  js["reps"] = o.reps;
  js["warmup"] = o.warmup;
  std::ofstream(o.out + "/ep_bench" + sfx + ".json") << js.dump(2) << "\n";
  std::printf("\nep-bench: wrote %s/ep_bench%s.csv, ep_a2a%s.csv, ep_bench%s.json\n", o.out.c_str(), sfx.c_str(),
              sfx.c_str(), sfx.c_str());
  return 0;
}
