// Expert parallelism over NCCL on 1, 2 and 4 GPUs of this machine (one thread per GPU,
// communicators by ncclCommInitAll as run_on_gpus makes them): the EP output against the single-GPU layer holding every expert (on GPU 0), for
// each format this build's CUDA backend runs, uneven routing (one rank receives most tokens), a
// rank receiving no tokens, M = 0 on some ranks, ids that select nothing, a non-contiguous
// placement with a rank owning no expert, both modes (EXACT, PADDED) and FP8 dispatch. PADDED
// mode is also captured in a CUDA graph and replayed (same bytes as the eager call).
// Skipped (GTEST_SKIP) without NCCL in the build or with fewer GPUs than the case needs.
// Each rank prints "[ ep ] rank R: CASE" (flushed) before each case; a watchdog fails the test
// (ncclCommAbort, or process exit if the threads stay blocked) when no rank makes progress for
// FMOE_EP_TEST_STALL_S seconds (default 120), printing the step each rank was in.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>

#if defined(FUSEDMOE_WITH_NCCL)
#include <nccl.h>
#endif

#include "cpu/ep_test_util.hpp"
#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

using eptest::Routing;

int gpu_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

struct FormatCase {
  Format format;
  DType x;
  bool fp8_static;
  bool fp8_dispatch;
  const char* name;
};
const FormatCase kFormats[] = {
    {Format::BF16, DType::BF16, false, false, "bf16"},
    {Format::FP16, DType::F16, false, false, "fp16"},
    {Format::FP32, DType::F32, false, false, "fp32"},
    {Format::FP8_TENSOR, DType::BF16, true, false, "fp8_tensor_static"},
    {Format::FP8_CHANNEL, DType::BF16, false, false, "fp8_channel"},
    {Format::FP8_BLOCK, DType::BF16, false, false, "fp8_block"},
    {Format::FP8_BLOCK, DType::BF16, false, true, "fp8_block_fp8_dispatch"},
    // 4-bit formats: run where this build's CUDA backend has them (skipped with the reason else).
    {Format::W4A8_INT4, DType::BF16, false, false, "w4a8_int4"},
    {Format::MXFP4, DType::BF16, false, false, "mxfp4"},
    {Format::NVFP4, DType::BF16, false, false, "nvfp4"},
};
constexpr int64_t kE = 16, kK = 256, kN = 128, kTopk = 4;

struct GpuCase {
  std::string name;
  const FormatCase* f = nullptr;
  int world = 1;
  EpMode mode = EpMode::EXACT;
  std::vector<int32_t> owner;  // explicit (never empty here)
  bool explicit_owner = false;
  std::vector<int64_t> M;
  int64_t max_tokens = 0;
  LayerFile full;
  std::vector<LayerFile> parts;
  std::vector<std::vector<int32_t>> local;
  std::vector<test::Inputs> in;
  std::vector<HostTensor> ref, out, out_graph;
  std::vector<std::string> error;
};

LayerFile quantize(const FloatLayer& fl, const FormatCase& f) {
  QuantizeOptions qo;
  qo.format = f.format;
  if (f.format == Format::FP8_TENSOR && f.fp8_static) {
    qo.fp8_w13_input_scale = 4.0f / 448.0f;
    qo.fp8_w2_input_scale = 2.0f / 448.0f;
  }
  return quantize_layer(fl, qo);
}

// Weights of one rank on its device (device_index = rank: the backend runs where they are).
struct RankWeights {
  std::unique_ptr<DeviceLayer> dl;
  LayerWeights w;
  RankWeights(const LayerFile* lf, int device) {
    if (!lf) return;
    dl = std::make_unique<DeviceLayer>(*lf);
    w = dl->weights;
    for (TensorView* v : {&w.w13_weight, &w.w2_weight, &w.w13_weight_scale, &w.w2_weight_scale, &w.w13_weight_scale_2,
                          &w.w2_weight_scale_2, &w.w13_input_scale, &w.w2_input_scale, &w.w13_bias, &w.w2_bias})
      v->device_index = device;
  }
};

std::vector<GpuCase> make_cases(int world) {
  std::vector<GpuCase> cases;
  struct Sc {
    std::vector<int64_t> M;
    Routing routing;
    bool map;
    const char* name;
  };
  std::vector<Sc> scs;
  if (world == 1) {
    scs = {{{37}, Routing::UNIFORM, false, "uniform"},
           {{0}, Routing::UNIFORM, false, "m0"},
           {{21}, Routing::SOME_INVALID, false, "invalid_ids"}};
  } else {
    std::vector<int64_t> uneven(world), with_zero(world), flat(world, 24);
    for (int r = 0; r < world; ++r) {
      uneven[r] = 5 + 31 * r;
      with_zero[r] = r % 2 == 1 ? 0 : 29 + r;
    }
    scs = {{uneven, Routing::UNIFORM, false, "uniform"},
           {flat, Routing::SKEWED, false, "skewed_rank0_most"},
           {with_zero, Routing::EMPTY_LAST_RANK, false, "m0_and_empty_last_rank"},
           {flat, Routing::SOME_INVALID, true, "map_noncontiguous_invalid_ids"}};
  }
  uint64_t seed = 7000 + 100 * world;
  for (const auto& f : kFormats)
    for (EpMode mode : {EpMode::EXACT, EpMode::PADDED})
      for (const Sc& sc : scs) {
        GpuCase c;
        c.name = std::string(f.name) + "/" + ep_mode_name(mode) + "/" + sc.name + "/world" + std::to_string(world);
        c.f = &f;
        c.world = world;
        c.mode = mode;
        c.M = sc.M;
        c.max_tokens = *std::max_element(sc.M.begin(), sc.M.end()) + 3;
        c.owner = contiguous_expert_owner(kE, world);
        if (sc.map && world > 1) {
          // Non-contiguous and uneven; the last rank owns nothing (it still routes its tokens).
          for (int64_t e = 0; e < kE; ++e)
            c.owner[e] = static_cast<int32_t>((e * 5 + 1) % (world - 1 > 0 ? world - 1 : 1));
          c.explicit_owner = true;
        }
        LayerConfig cfg;
        const FloatLayer fl = random_float_layer(cfg, kE, kK, kN, ++seed, true, 0.08f);
        c.full = quantize(fl, f);
        for (int d = 0; d < world; ++d) {
          c.local.push_back(owned_experts(c.owner, d));
          c.parts.push_back(c.local.back().empty() ? LayerFile{} : quantize(eptest::part_of(fl, c.local.back()), f));
        }
        for (int r = 0; r < world; ++r)
          c.in.push_back(eptest::ep_inputs(c.M[r], kK, kTopk, kE, f.x, seed * 13 + r, sc.routing, c.owner, world));
        c.out.resize(world);
        c.out_graph.resize(world);
        c.error.resize(world);
        cases.push_back(std::move(c));
      }
  return cases;
}

// The single-GPU references (GPU 0); false when this build cannot run the format.
bool single_gpu_references(GpuCase& c, std::string* why) {
  FMOE_CUDA(cudaSetDevice(0));
  DeviceLayer dl(c.full);
  Layer layer(c.full.config, dl.weights);
  Problem p;
  p.num_tokens = c.max_tokens;
  p.hidden = kK;
  p.inter = kN;
  p.num_experts = p.num_global_experts = kE;
  p.topk = kTopk;
  const Support s = layer.can_implement(p);
  if (!s.ok) {
    *why = s.reason;
    return false;
  }
  for (const auto& in : c.in)
    c.ref.push_back(in.hidden.shape[0] > 0 ? run_gpu(layer, in) : HostTensor(c.f->x, {0, kK}));
  return true;
}

// The rank threads meet at a fusedmoe::HostBarrier (ep.hpp) after every step that allocates or
// synchronises (layer, buffers, Layer::warmup) and launch collectives only after it. A rank whose
// step failed says so at the barrier and every rank then skips what follows; the watchdog's
// abort() releases every waiter with false.
// Where each rank thread is: one flushed line per rank and case, the step for the watchdog's dump,
// and a tick per step (the watchdog fails the test when no rank ticks for a while).
class Progress {
 public:
  explicit Progress(int world) : where_(static_cast<size_t>(world)) {}
  void at(int rank, const std::string& name, const char* step) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      where_[rank] = name + " : " + step;
    }
    ticks_.fetch_add(1);
  }
  void start_case(int rank, const std::string& name) {
    std::printf("[ ep ] rank %d: %s\n", rank, name.c_str());
    std::fflush(stdout);
    at(rank, name, "set-up");
  }
  long ticks() const { return ticks_.load(); }
  std::string dump() {
    std::lock_guard<std::mutex> lk(mu_);
    std::string s;
    for (size_t r = 0; r < where_.size(); ++r) s += "  rank " + std::to_string(r) + ": " + where_[r] + "\n";
    return s;
  }
  std::atomic<bool> aborted{false};

 private:
  std::mutex mu_;
  std::vector<std::string> where_;
  std::atomic<long> ticks_{0};
};

struct Graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
};

// Each rank runs every collective of a case unless a host barrier says otherwise: a step that
// throws is recorded (ExpertParallelLayer::run finishes its own collectives before rethrowing a
// local error) and the next collective still runs; the case fails with the first error.
// Graphs are kept (in `graphs`) until every rank is done with every collective: destroying one
// releases NCCL's resources of the captured calls (freed at the communicator's next call).
void run_rank(GpuCase& c, int rank, const std::shared_ptr<Transport>& tr, cudaStream_t stream, HostBarrier& hb,
              Progress& prog, std::vector<Graph>& graphs) {
  prog.start_case(rank, c.name);
  std::unique_ptr<RankWeights> rwp;
  std::unique_ptr<ExpertParallelLayer> epp;
  std::unique_ptr<DeviceTensor> x, ids, w, out;
  const int64_t M = c.M[rank];
  HostTensor out_h(c.f->x, {M, kK});
  std::string setup_error;
  try {
    const LayerFile* lf = c.local[rank].empty() ? nullptr : &c.parts[rank];
    rwp = std::make_unique<RankWeights>(lf, rank);
    EpConfig ec;
    ec.num_global_experts = kE;
    ec.hidden = kK;
    ec.topk = kTopk;
    ec.max_tokens_per_rank = c.max_tokens;
    if (c.explicit_owner) ec.expert_owner = c.owner;
    ec.mode = c.mode;
    ec.fp8_dispatch = c.f->fp8_dispatch;
    ec.hidden_dtype = c.f->x;
    epp = std::make_unique<ExpertParallelLayer>(tr, c.full.config, rwp->w, ec);
    const test::Inputs& in0 = c.in[rank];
    auto dev0 = [&](const HostTensor& h) {
      auto t = std::make_unique<DeviceTensor>(h);
      t->view.device_index = rank;
      return t;
    };
    x = dev0(in0.hidden);
    ids = dev0(in0.ids);
    w = dev0(in0.weights);
    if (!out_h.bytes.empty()) std::memset(out_h.bytes.data(), 0xFF, out_h.bytes.size());  // NaN poison
    out = dev0(out_h);
    // Part of the set-up: Layer::warmup allocates, frees and synchronises (a rank owning no
    // expert skips it and would otherwise be in its first collective long before the others).
    prog.at(rank, c.name, "warmup");
    epp->warmup(stream);
    FMOE_CUDA(cudaStreamSynchronize(stream));
    FMOE_CUDA(cudaDeviceSynchronize());
  } catch (const std::exception& e) {
    setup_error = e.what();
  }
  prog.at(rank, c.name, "host barrier after set-up");
  if (!hb.wait(setup_error.empty()))
    throw std::runtime_error(!setup_error.empty() ? setup_error
                             : prog.aborted       ? "aborted by the watchdog"
                                                  : "another rank's set-up failed");
  ExpertParallelLayer& ep = *epp;
  std::string err;
  auto step = [&](const char* what, const std::function<void()>& fn) {
    prog.at(rank, c.name, what);
    if (prog.aborted) throw std::runtime_error(std::string("aborted by the watchdog before ") + what);
    try {
      fn();
    } catch (const std::exception& e) {
      if (err.empty()) err = std::string(what) + ": " + e.what();
    }
  };
  EpRunArgs a;
  a.hidden_states = x->view;
  a.topk_ids = ids->view;
  a.topk_weights = w->view;
  a.output = out->view;
  a.stream = stream;
  step("run 1", [&] { ep.run(a); });
  step("run 2", [&] { ep.run(a); });  // twice: state of the first call must not leak
  step("sync", [&] { FMOE_CUDA(cudaStreamSynchronize(stream)); });
  step("download", [&] {
    if (!out_h.bytes.empty()) out->buf.download(out_h.bytes.data(), out_h.bytes.size());
  });
  c.out[rank] = out_h;
  if (c.mode == EpMode::PADDED) {
    // No host sync in PADDED mode: capture the whole layer (kernels + NCCL + local experts) in a
    // CUDA graph and replay it into a freshly poisoned output. Every rank captures and
    // instantiates (host work, allocations) before any rank launches its graph.
    HostTensor poison(c.f->x, {M, kK});
    if (!poison.bytes.empty()) std::memset(poison.bytes.data(), 0xFF, poison.bytes.size());
    std::string cap_err;
    Graph g;
    prog.at(rank, c.name, "capture");
    try {
      if (!poison.bytes.empty()) out->buf.upload(poison.bytes.data(), poison.bytes.size());
      FMOE_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      try {
        ep.run(a);
      } catch (...) {
        cudaGraph_t partial = nullptr;
        cudaStreamEndCapture(stream, &partial);  // leave the stream usable
        if (partial) cudaGraphDestroy(partial);
        cudaGetLastError();
        throw;
      }
      FMOE_CUDA(cudaStreamEndCapture(stream, &g.graph));
      FMOE_CUDA(cudaGraphInstantiate(&g.exec, g.graph, 0));
      FMOE_CUDA(cudaDeviceSynchronize());
    } catch (const std::exception& e) {
      cap_err = std::string("capture: ") + e.what();
    }
    if (g.graph || g.exec) graphs.push_back(g);
    prog.at(rank, c.name, "host barrier after capture");
    if (hb.wait(cap_err.empty())) {
      step("graph launch", [&] {
        FMOE_CUDA(cudaGraphLaunch(g.exec, stream));
        FMOE_CUDA(cudaStreamSynchronize(stream));
      });
      HostTensor gout(c.f->x, {M, kK});
      step("graph download", [&] {
        if (!gout.bytes.empty()) out->buf.download(gout.bytes.data(), gout.bytes.size());
      });
      c.out_graph[rank] = gout;
    } else if (err.empty()) {
      err = !cap_err.empty() ? cap_err : prog.aborted ? "aborted by the watchdog" : "another rank's capture failed";
    }
  }
  prog.at(rank, c.name, "done");
  if (!err.empty()) throw std::runtime_error(err);
}

// After every case of a rank: wait for the others (no collective after this), then free the graphs.
void finish_rank(HostBarrier& hb, std::vector<Graph>& graphs) {
  hb.wait(true);
  for (auto& g : graphs) {
    if (g.exec) cudaGraphExecDestroy(g.exec);
    if (g.graph) cudaGraphDestroy(g.graph);
  }
  graphs.clear();
}

double tolerance(const FormatCase& f) {
  if (f.x == DType::F32) return 1e-4;
  // 16-bit formats: each rank's partial sum is rounded to the output dtype before the home rank
  // adds them. Formats that quantise GEMM2's input per row may also see an intermediate value one
  // 16-bit ulp apart (another kernel configuration for another row count) land on another code.
  if (f.format == Format::BF16 || f.format == Format::FP16) return 1e-2;
  return 3e-2;
}

// Seconds without any rank finishing a step before the watchdog fails the test
// (FMOE_EP_TEST_STALL_S, default 120).
int stall_seconds() {
  const char* v = std::getenv("FMOE_EP_TEST_STALL_S");
  const int s = v ? std::atoi(v) : 0;
  return s > 0 ? s : 120;
}

void run_world(int world) {
#if defined(FUSEDMOE_WITH_NCCL)
  if (!nccl_available()) GTEST_SKIP() << "this build has no NCCL transport";
  if (gpu_count() < world) GTEST_SKIP() << "needs " << world << " GPUs, have " << gpu_count();
  std::vector<GpuCase> all = make_cases(world), cases;
  for (auto& c : all) {
    std::string why;
    if (single_gpu_references(c, &why))
      cases.push_back(std::move(c));
    else
      std::printf("[ ep ] skip %s: %s\n", c.name.c_str(), why.c_str());
  }
  std::fflush(stdout);
  ASSERT_FALSE(cases.empty()) << "no format of this build runs on the GPU";
  // The communicators are the test's (as run_on_gpus makes them: ncclCommInitAll over 0..world-1),
  // so that the watchdog can abort them.
  std::vector<ncclComm_t> comms(world);
  std::vector<int> devs(world);
  for (int i = 0; i < world; ++i) devs[i] = i;
  ASSERT_EQ(ncclCommInitAll(comms.data(), world, devs.data()), ncclSuccess);
  HostBarrier hb(world);
  Progress prog(world);
  std::atomic<int> finished{0};
  std::vector<std::string> thread_error(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        FMOE_CUDA(cudaSetDevice(r));
        auto tr = make_nccl_transport(static_cast<void*>(comms[r]), r);
        cudaStream_t stream = nullptr;
        FMOE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        std::vector<Graph> graphs;
        for (auto& c : cases) {
          if (prog.aborted) {
            c.error[r] = "not run: aborted by the watchdog";
            continue;
          }
          try {
            run_rank(c, r, tr, stream, hb, prog, graphs);
          } catch (const std::exception& e) {
            c.error[r] = e.what();
          }
        }
        prog.at(r, "(all cases)", "final host barrier");
        finish_rank(hb, graphs);
        cudaStreamDestroy(stream);
      } catch (const std::exception& e) {
        thread_error[r] = e.what();
      }
      finished.fetch_add(1);
    });
  // Watchdog: no step finished on any rank for stall_seconds() -> print where every rank is,
  // abort the communicators (the NCCL kernels return) and fail; if the rank threads still do not
  // come back (blocked in the driver), end the process rather than hang.
  const int stall_s = stall_seconds();
  bool aborted = false;
  long last = prog.ticks();
  auto last_change = std::chrono::steady_clock::now();
  while (finished.load() < world) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const long now_ticks = prog.ticks();
    const auto now = std::chrono::steady_clock::now();
    if (now_ticks != last) {
      last = now_ticks;
      last_change = now;
      continue;
    }
    if (aborted || now - last_change < std::chrono::seconds(stall_s)) continue;
    aborted = true;
    std::printf("[ ep ] STALL: no progress for %d s (FMOE_EP_TEST_STALL_S); ranks are at:\n%s"
                "[ ep ] aborting the communicators\n",
                stall_s, prog.dump().c_str());
    std::fflush(stdout);
    prog.aborted = true;
    hb.abort();
    std::thread([comms, world] {
      for (int r = 0; r < world; ++r) ncclCommAbort(comms[r]);
    }).detach();
    const auto deadline = now + std::chrono::seconds(30);
    while (finished.load() < world && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (finished.load() < world) {
      std::printf("[ ep ] FAILED: rank threads still blocked 30 s after ncclCommAbort; ranks are at:\n%s"
                  "[ ep ] exiting the process\n",
                  prog.dump().c_str());
      std::fflush(stdout);
      std::_Exit(1);
    }
  }
  for (auto& t : threads) t.join();
  if (!aborted)
    for (auto& comm : comms) ncclCommDestroy(comm);
  ASSERT_FALSE(aborted) << "EP collectives stalled for " << stall_s << " s; the ranks were at:\n" << prog.dump();
  for (int r = 0; r < world; ++r) EXPECT_EQ(thread_error[r], "") << "rank " << r;
  for (auto& c : cases) {
    for (int r = 0; r < world; ++r) {
      SCOPED_TRACE(c.name + " home rank " + std::to_string(r) + " M=" + std::to_string(c.M[r]));
      EXPECT_EQ(c.error[r], "");
      if (!c.error[r].empty()) continue;
      if (c.M[r] > 0) {
        const double err = test::rel_error(test::to_double(c.out[r]), test::to_double(c.ref[r]));
        EXPECT_LT(err, tolerance(*c.f));
      }
      if (c.mode == EpMode::PADDED)
        EXPECT_TRUE(test::bitwise_equal(c.out[r], c.out_graph[r])) << "graph replay differs";
    }
  }
#else
  (void)world;
  GTEST_SKIP() << "this build has no NCCL transport";
#endif
}

// run_on_gpus itself (run_world makes its own communicators the same way, for the watchdog).
TEST(EpGpu, RunOnGpus) {
  if (!nccl_available()) GTEST_SKIP() << "this build has no NCCL transport";
  const int world = std::min(2, gpu_count());
  if (world < 1) GTEST_SKIP() << "no CUDA device";
  std::vector<int> seen(world, -1);
  run_on_gpus(world, [&](int rank, std::shared_ptr<Transport> tr) {
    int dev = -1;
    FMOE_CUDA(cudaGetDevice(&dev));
    EXPECT_EQ(dev, rank);
    EXPECT_EQ(tr->rank(), rank);
    EXPECT_EQ(tr->world(), world);
    cudaStream_t stream = nullptr;
    FMOE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    tr->barrier(stream);
    cudaStreamDestroy(stream);
    seen[rank] = rank;
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(seen[r], r);
}

TEST(EpGpu, NcclWorld1) { run_world(1); }
TEST(EpGpu, NcclWorld2) { run_world(2); }
TEST(EpGpu, NcclWorld4) { run_world(4); }

// The first case of `cases` in `format` / `mode` that this build runs (its references computed).
GpuCase* pick_case(std::vector<GpuCase>& cases, Format format, EpMode mode) {
  std::string why;
  for (auto& k : cases)
    if (k.f->format == format && k.mode == mode && single_gpu_references(k, &why)) return &k;
  return nullptr;
}

// Runs one case on `world` rank threads, each with the transport make_transport(rank) returns
// (called on the rank's thread), and checks every rank's output against the reference.
void run_single_case(int world, GpuCase& c, const std::function<std::shared_ptr<Transport>(int)>& make_transport) {
  HostBarrier hb(world);
  Progress prog(world);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(world);
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      std::vector<Graph> graphs;
      try {
        auto tr = make_transport(r);
        cudaStream_t stream = nullptr;
        FMOE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        try {
          run_rank(c, r, tr, stream, hb, prog, graphs);
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
        finish_rank(hb, graphs);  // before the transport (and its communicator) goes
        cudaStreamDestroy(stream);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[r], "");
    if (errors[r].empty() && c.M[r] > 0)
      EXPECT_LT(test::rel_error(test::to_double(c.out[r]), test::to_double(c.ref[r])), tolerance(*c.f));
  }
}

// The multi-process bootstrap path in one process: a unique id, ncclCommInitRank per thread.
TEST(EpGpu, UniqueIdBootstrap) {
  if (!nccl_available()) GTEST_SKIP() << "this build has no NCCL transport";
  const int world = std::min(2, gpu_count());
  if (world < 1) GTEST_SKIP() << "no CUDA device";
  const EpUniqueId id = EpUniqueId::from_hex(nccl_unique_id().to_hex());
  std::vector<GpuCase> cases = make_cases(world);
  GpuCase* c = pick_case(cases, Format::FP32, EpMode::EXACT);
  ASSERT_NE(c, nullptr);
  run_single_case(world, *c, [&](int r) { return make_nccl_transport(id, world, r, r); });
}

// The caller's own communicators (ncclCommInitAll here), wrapped, used and destroyed by the caller.
TEST(EpGpu, CallersCommunicator) {
#if defined(FUSEDMOE_WITH_NCCL)
  const int world = std::min(2, gpu_count());
  if (world < 1) GTEST_SKIP() << "no CUDA device";
  std::vector<GpuCase> cases = make_cases(world);
  GpuCase* c = pick_case(cases, Format::FP32, EpMode::PADDED);
  ASSERT_NE(c, nullptr);
  std::vector<ncclComm_t> comms(world);
  std::vector<int> devs(world);
  for (int i = 0; i < world; ++i) devs[i] = i;
  ASSERT_EQ(ncclCommInitAll(comms.data(), world, devs.data()), ncclSuccess);
  run_single_case(world, *c, [&](int r) {
    FMOE_CUDA(cudaSetDevice(r));
    auto tr = make_nccl_transport(static_cast<void*>(comms[r]), r);
    EXPECT_EQ(tr->rank(), r);
    EXPECT_EQ(tr->world(), world);
    return tr;
  });
  for (auto& comm : comms) ncclCommDestroy(comm);  // still the caller's
#else
  GTEST_SKIP() << "this build has no NCCL transport";
#endif
}

}  // namespace
}  // namespace fusedmoe::gputest
