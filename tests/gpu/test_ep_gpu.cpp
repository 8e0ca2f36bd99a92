// Expert parallelism over NCCL on 1, 2 and 4 GPUs of this machine (one thread per GPU,
// run_on_gpus): the EP output against the single-GPU layer holding every expert (on GPU 0), for
// each format this build's CUDA backend runs, uneven routing (one rank receives most tokens), a
// rank receiving no tokens, M = 0 on some ranks, ids that select nothing, a non-contiguous
// placement with a rank owning no expert, both modes (EXACT, PADDED) and FP8 dispatch. PADDED
// mode is also captured in a CUDA graph and replayed (same bytes as the eager call).
// Skipped (GTEST_SKIP) without NCCL in the build or with fewer GPUs than the case needs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <stdexcept>
#include <condition_variable>

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

// A host-side barrier of the rank threads. Every rank allocates (layer, buffers) before it and
// launches collectives only after it: a CUDA allocation or free on one rank can wait for the
// devices while a peer's NCCL kernel spins waiting for that rank (one process, one thread per GPU).
// A rank whose set-up failed says so before the barrier and every rank then skips the case.
class HostBarrier {
 public:
  explicit HostBarrier(int n) : n_(n) {}
  // Returns true when no rank reported a failure for this round.
  bool wait(bool ok) {
    std::unique_lock<std::mutex> lk(mu_);
    if (!ok) failed_ = true;
    const int gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      round_ok_ = !failed_;
      failed_ = false;
      cv_.notify_all();
    } else {
      cv_.wait(lk, [&] { return gen_ != gen; });
    }
    return round_ok_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, count_ = 0, gen_ = 0;
  bool failed_ = false, round_ok_ = true;
};

void run_rank(GpuCase& c, int rank, const std::shared_ptr<Transport>& tr, cudaStream_t stream, HostBarrier& hb) {
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
    FMOE_CUDA(cudaDeviceSynchronize());
  } catch (const std::exception& e) {
    setup_error = e.what();
  }
  if (!hb.wait(setup_error.empty()))
    throw std::runtime_error(setup_error.empty() ? "another rank's set-up failed" : setup_error);
  ExpertParallelLayer& ep = *epp;
  ep.warmup(stream);
  EpRunArgs a;
  a.hidden_states = x->view;
  a.topk_ids = ids->view;
  a.topk_weights = w->view;
  a.output = out->view;
  a.stream = stream;
  ep.run(a);
  ep.run(a);  // twice: state of the first call must not leak
  FMOE_CUDA(cudaStreamSynchronize(stream));
  if (!out_h.bytes.empty()) out->buf.download(out_h.bytes.data(), out_h.bytes.size());
  c.out[rank] = out_h;
  if (c.mode == EpMode::PADDED) {
    // No host sync in PADDED mode: capture the whole layer (kernels + NCCL + local experts) in a
    // CUDA graph and replay it into a freshly poisoned output.
    HostTensor poison(c.f->x, {M, kK});
    if (!poison.bytes.empty()) std::memset(poison.bytes.data(), 0xFF, poison.bytes.size());
    if (!poison.bytes.empty()) out->buf.upload(poison.bytes.data(), poison.bytes.size());
    tr->barrier(stream);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    FMOE_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    ep.run(a);
    FMOE_CUDA(cudaStreamEndCapture(stream, &graph));
    FMOE_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    FMOE_CUDA(cudaGraphLaunch(exec, stream));
    FMOE_CUDA(cudaStreamSynchronize(stream));
    HostTensor g(c.f->x, {M, kK});
    if (!g.bytes.empty()) out->buf.download(g.bytes.data(), g.bytes.size());
    c.out_graph[rank] = g;
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  tr->barrier(stream);
}

double tolerance(const FormatCase& f) {
  if (f.x == DType::F32) return 1e-4;
  // 16-bit formats: each rank's partial sum is rounded to the output dtype before the home rank
  // adds them. Formats that quantise GEMM2's input per row may also see an intermediate value one
  // 16-bit ulp apart (another kernel configuration for another row count) land on another code.
  if (f.format == Format::BF16 || f.format == Format::FP16) return 1e-2;
  return 3e-2;
}

void run_world(int world) {
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
  ASSERT_FALSE(cases.empty()) << "no format of this build runs on the GPU";
  HostBarrier hb(world);
  run_on_gpus(world, [&](int rank, std::shared_ptr<Transport> tr) {
    cudaStream_t stream = nullptr;
    FMOE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (auto& c : cases) {
      // A failure on one rank must not leave the others inside a collective: every rank runs
      // every case up to the same collectives, and exceptions are caught per case. An
      // argument/validation error is raised before any collective of that call, on all ranks.
      try {
        run_rank(c, rank, tr, stream, hb);
      } catch (const std::exception& e) {
        c.error[rank] = e.what();
      }
    }
    cudaStreamDestroy(stream);
  });
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
}

TEST(EpGpu, NcclWorld1) { run_world(1); }
TEST(EpGpu, NcclWorld2) { run_world(2); }
TEST(EpGpu, NcclWorld4) { run_world(4); }

// The multi-process bootstrap path in one process: a unique id, ncclCommInitRank per thread.
TEST(EpGpu, UniqueIdBootstrap) {
  if (!nccl_available()) GTEST_SKIP() << "this build has no NCCL transport";
  const int world = std::min(2, gpu_count());
  if (world < 1) GTEST_SKIP() << "no CUDA device";
  const EpUniqueId id = EpUniqueId::from_hex(nccl_unique_id().to_hex());
  std::vector<GpuCase> cases = make_cases(world);
  GpuCase* c = nullptr;
  std::string why;
  for (auto& k : cases)
    if (k.f->format == Format::FP32 && k.mode == EpMode::EXACT && single_gpu_references(k, &why)) {
      c = &k;
      break;
    }
  ASSERT_NE(c, nullptr);
  HostBarrier hb(world);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(world);
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        auto tr = make_nccl_transport(id, world, r, r);
        cudaStream_t stream = nullptr;
        FMOE_CUDA(cudaStreamCreate(&stream));
        run_rank(*c, r, tr, stream, hb);
        cudaStreamDestroy(stream);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[r], "");
    if (errors[r].empty() && c->M[r] > 0)
      EXPECT_LT(test::rel_error(test::to_double(c->out[r]), test::to_double(c->ref[r])), tolerance(*c->f));
  }
}

// The caller's own communicators (ncclCommInitAll here), wrapped, used and destroyed by the caller.
TEST(EpGpu, CallersCommunicator) {
#if defined(FUSEDMOE_WITH_NCCL)
  const int world = std::min(2, gpu_count());
  if (world < 1) GTEST_SKIP() << "no CUDA device";
  std::vector<GpuCase> cases = make_cases(world);
  GpuCase* c = nullptr;
  std::string why;
  for (auto& k : cases)
    if (k.f->format == Format::FP32 && k.mode == EpMode::PADDED && single_gpu_references(k, &why)) {
      c = &k;
      break;
    }
  ASSERT_NE(c, nullptr);
  std::vector<ncclComm_t> comms(world);
  std::vector<int> devs(world);
  for (int i = 0; i < world; ++i) devs[i] = i;
  ASSERT_EQ(ncclCommInitAll(comms.data(), world, devs.data()), ncclSuccess);
  HostBarrier hb(world);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(world);
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        FMOE_CUDA(cudaSetDevice(r));
        auto tr = make_nccl_transport(static_cast<void*>(comms[r]), r);
        EXPECT_EQ(tr->rank(), r);
        EXPECT_EQ(tr->world(), world);
        cudaStream_t stream = nullptr;
        FMOE_CUDA(cudaStreamCreate(&stream));
        run_rank(*c, r, tr, stream, hb);
        cudaStreamDestroy(stream);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& comm : comms) ncclCommDestroy(comm);  // still the caller's
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[r], "");
    if (errors[r].empty() && c->M[r] > 0)
      EXPECT_LT(test::rel_error(test::to_double(c->out[r]), test::to_double(c->ref[r])), tolerance(*c->f));
  }
#else
  GTEST_SKIP() << "this build has no NCCL transport";
#endif
}

}  // namespace
}  // namespace fusedmoe::gputest
