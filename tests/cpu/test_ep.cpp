// Expert parallelism on the CPU backend: G = 1, 2, 4 ranks as threads over the in-process thread
// transport, for every format, routing, placement and mode. Two checks per case:
//  * bitwise: the EP output equals the EP arithmetic done without a transport (each rank's local
//    layer on the home rank's tokens, partials summed in ascending rank order; eptest::
//    combine_reference). The CPU backend computes each token row independently of the other rows
//    of the call and deterministically, so any error in routing, packing, the transport, the
//    expert_map or combine shows as a bit difference. Exception: fp8-tensor with dynamic scales,
//    whose per-tensor scale depends on which rows a rank receives (docs/EXPERT_PARALLEL.md).
//  * against the single (non-EP) layer holding all experts: bitwise for G = 1; for G > 1 within
//    1e-2 (16-bit outputs: each rank's partial sum is rounded to the output dtype before the home
//    rank adds them; the single layer rounds once) or 2e-5 (F32 outputs: fp32 reassociation).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "cpu/ep_test_util.hpp"

namespace fusedmoe::eptest {
namespace {

struct FormatCase {
  Format format;
  DType x;
  bool fp8_static = false;
  bool fp8_dispatch = false;
  ActDtype act = ActDtype::BF16;
  const char* name;
};

const FormatCase kFormats[] = {
    {Format::BF16, DType::BF16, false, false, ActDtype::BF16, "bf16"},
    {Format::FP16, DType::F16, false, false, ActDtype::BF16, "fp16"},
    {Format::FP32, DType::F32, false, false, ActDtype::BF16, "fp32"},
    {Format::FP8_TENSOR, DType::BF16, true, false, ActDtype::BF16, "fp8_tensor_static"},
    {Format::FP8_TENSOR, DType::BF16, false, false, ActDtype::BF16, "fp8_tensor_dynamic"},
    {Format::FP8_CHANNEL, DType::BF16, false, false, ActDtype::BF16, "fp8_channel"},
    {Format::FP8_BLOCK, DType::BF16, false, false, ActDtype::BF16, "fp8_block"},
    {Format::FP8_BLOCK, DType::BF16, false, true, ActDtype::BF16, "fp8_block_fp8_dispatch"},
    {Format::W4A8_INT4, DType::BF16, false, false, ActDtype::BF16, "w4a8_int4"},
    {Format::MXFP4, DType::BF16, false, false, ActDtype::BF16, "mxfp4"},
    {Format::NVFP4, DType::BF16, false, false, ActDtype::NVFP4, "nvfp4_w4a4"},
};

constexpr int64_t kE = 16, kK = 256, kN = 128, kTopk = 3;

LayerFile quantize(const FloatLayer& fl, const FormatCase& f) {
  QuantizeOptions qo;
  qo.format = f.format;
  qo.act_dtype = f.act;
  qo.threads = 1;
  if (f.format == Format::FP8_TENSOR && f.fp8_static) {
    qo.fp8_w13_input_scale = 4.0f / 448.0f;
    qo.fp8_w2_input_scale = 2.0f / 448.0f;
  }
  if (f.format == Format::NVFP4 && f.act == ActDtype::NVFP4) {
    qo.nvfp4_w13_act_amax = 4.0f;
    qo.nvfp4_w2_act_amax = 2.0f;
  }
  return quantize_layer(fl, qo);
}

struct Scenario {
  int world;
  std::vector<int64_t> M;  // tokens per rank
  Routing routing;
  std::vector<int32_t> owner;  // empty: contiguous
  EpMode mode;
  std::string name;
};

void run_case(const FormatCase& f, const Scenario& sc, uint64_t seed) {
  SCOPED_TRACE(std::string(f.name) + " " + sc.name + " world=" + std::to_string(sc.world) + " " +
               ep_mode_name(sc.mode));
  const int G = sc.world;
  LayerConfig cfg;
  cfg.activation = Activation::SILU;
  const FloatLayer fl = random_float_layer(cfg, kE, kK, kN, seed, /*with_bias=*/true, 0.08f);
  const std::vector<int32_t> owner = sc.owner.empty() ? contiguous_expert_owner(kE, G) : sc.owner;
  const LayerFile full = quantize(fl, f);
  std::vector<LayerFile> parts(static_cast<size_t>(G));
  std::vector<std::vector<int32_t>> local(static_cast<size_t>(G));
  for (int d = 0; d < G; ++d) {
    local[d] = owned_experts(owner, d);
    if (!local[d].empty()) parts[d] = quantize(part_of(fl, local[d]), f);
  }
  std::vector<Inputs> in;
  for (int r = 0; r < G; ++r)
    in.push_back(ep_inputs(sc.M[r], kK, kTopk, kE, f.x, seed * 131 + r, sc.routing, owner, G));

  std::vector<HostTensor> ep_out(static_cast<size_t>(G));
  std::vector<EpStats> stats(static_cast<size_t>(G));
  const int64_t max_tokens = *std::max_element(sc.M.begin(), sc.M.end()) + 2;
  run_threads(G, [&](int rank, std::shared_ptr<Transport> tr) {
    EpConfig ec;
    ec.num_global_experts = kE;
    ec.hidden = kK;
    ec.topk = kTopk;
    ec.max_tokens_per_rank = max_tokens;
    ec.expert_owner = sc.owner;
    ec.mode = sc.mode;
    ec.fp8_dispatch = f.fp8_dispatch;
    ec.hidden_dtype = f.x;
    const LayerWeights w = local[rank].empty() ? LayerWeights{} : parts[rank].weights();
    ExpertParallelLayer ep(tr, full.config, w, ec, LayerOptions{Backend::CPU, 1, CpuPrecision::FAST});
    HostTensor out(f.x, {sc.M[rank], kK});
    if (!out.bytes.empty()) std::memset(out.bytes.data(), 0xFF, out.bytes.size());  // poison
    EpRunArgs a;
    a.hidden_states = in[rank].hidden.view();
    a.topk_ids = in[rank].ids.view();
    a.topk_weights = in[rank].weights.view();
    a.output = out.view();
    // Twice: the second call checks that nothing of the first one leaks into it.
    ep.run(a);
    ep.dispatch(a);
    ep.compute(a);
    ep.combine(a);
    ep_out[rank] = std::move(out);
    stats[rank] = ep.last_stats();
  });

  const bool bitwise_ok = !(f.format == Format::FP8_TENSOR && !f.fp8_static);
  for (int r = 0; r < G; ++r) {
    SCOPED_TRACE("home rank " + std::to_string(r) + " M=" + std::to_string(sc.M[r]));
    // Reference A: the EP arithmetic, each rank's local layer on all of this rank's tokens.
    std::vector<HostTensor> partials(static_cast<size_t>(G));
    for (int d = 0; d < G; ++d) {
      if (local[d].empty()) {
        partials[d] = HostTensor(f.x, {sc.M[r], kK});
        continue;
      }
      Inputs rin = in[r];
      rin.has_map = true;
      rin.expert_map = expert_map_of(owner, d);
      partials[d] = test::run_layer(parts[d], rin, CpuPrecision::FAST, 1);
    }
    const HostTensor ref_a = combine_reference(in[r], partials, owner, G);
    if (bitwise_ok) EXPECT_TRUE(test::bitwise_equal(ep_out[r], ref_a)) << "EP differs from the EP arithmetic";
    // Reference B: the single layer with every expert.
    const HostTensor single = test::run_layer(full, in[r], CpuPrecision::FAST, 1);
    if (G == 1 && bitwise_ok) {
      EXPECT_TRUE(test::bitwise_equal(ep_out[r], single)) << "one rank must equal the single layer";
    } else if (sc.M[r] > 0) {
      double tol = f.x == DType::F32 ? 2e-5 : 1e-2;
      // fp8-tensor dynamic: another per-tensor scale (over the rows a rank receives), so another
      // e4m3 rounding of every operand: the two results differ by about twice fp8 noise.
      if (!bitwise_ok) tol = 0.15;
      EXPECT_LT(test::rel_error(test::to_double(ep_out[r]), test::to_double(single)), tol);
    }
  }
  // Statistics: every rank received the rows the others sent it.
  if (sc.mode == EpMode::EXACT) {
    int64_t sent = 0, received = 0;
    for (const auto& s : stats) {
      sent += s.sent_rows;
      received += s.received_rows;
      EXPECT_TRUE(s.host_synced);
    }
    EXPECT_EQ(sent, received);
  } else {
    for (const auto& s : stats) EXPECT_EQ(s.received_rows, G * max_tokens);
  }
}

std::vector<Scenario> scenarios() {
  std::vector<Scenario> v;
  for (EpMode mode : {EpMode::EXACT, EpMode::PADDED}) {
    const std::string m = ep_mode_name(mode);
    v.push_back({1, {11}, Routing::UNIFORM, {}, mode, "g1_uniform"});
    v.push_back({1, {0}, Routing::UNIFORM, {}, mode, "g1_m0"});
    v.push_back({2, {13, 9}, Routing::UNIFORM, {}, mode, "g2_uniform"});
    v.push_back({2, {17, 5}, Routing::SKEWED, {}, mode, "g2_skewed"});
    v.push_back({2, {0, 12}, Routing::EMPTY_LAST_RANK, {}, mode, "g2_m0_rank0_empty_rank1"});
    v.push_back({4, {9, 0, 14, 3}, Routing::UNIFORM, {}, mode, "g4_uniform_m0"});
    v.push_back({4, {20, 6, 7, 1}, Routing::SKEWED, {}, mode, "g4_skewed"});
    v.push_back({4, {8, 8, 0, 8}, Routing::EMPTY_LAST_RANK, {}, mode, "g4_empty_rank3"});
    v.push_back({4, {7, 10, 4, 0}, Routing::SOME_INVALID, {}, mode, "g4_invalid_ids"});
    // Non-contiguous, uneven ownership: rank 3 owns nothing, rank 0 owns one expert.
    std::vector<int32_t> owner = {1, 2, 0, 1, 2, 1, 2, 1, 2, 2, 1, 2, 1, 1, 2, 2};
    v.push_back({4, {6, 11, 0, 9}, Routing::UNIFORM, owner, mode, "g4_map_uneven_rank3_no_experts"});
    std::vector<int32_t> owner2 = {1, 0, 1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1, 0};
    v.push_back({2, {15, 4}, Routing::SKEWED, owner2, mode, "g2_map_interleaved"});
  }
  return v;
}

class EpCpu : public ::testing::TestWithParam<int> {};

TEST_P(EpCpu, MatchesSingleLayerAndEpArithmetic) {
  const FormatCase& f = kFormats[GetParam()];
  uint64_t seed = 100 + 37 * static_cast<uint64_t>(GetParam());
  for (const Scenario& sc : scenarios()) run_case(f, sc, seed++);
}

INSTANTIATE_TEST_SUITE_P(Formats, EpCpu, ::testing::Range(0, static_cast<int>(std::size(kFormats))),
                         [](const ::testing::TestParamInfo<int>& i) { return std::string(kFormats[i.param].name); });

TEST(EpCpu, RouterWeightOnInputTop1) {
  // vLLM's apply_router_weight_on_input (top-1): the weight scales the token before GEMM1, on the
  // rank that owns the expert.
  const int G = 2;
  LayerConfig cfg;
  const FloatLayer fl = random_float_layer(cfg, 4, 64, 32, 5, false, 0.1f);
  QuantizeOptions qo;
  qo.format = Format::BF16;
  const LayerFile full = quantize_layer(fl, qo);
  const auto owner = contiguous_expert_owner(4, G);
  std::vector<LayerFile> parts;
  for (int d = 0; d < G; ++d) parts.push_back(quantize_layer(part_of(fl, owned_experts(owner, d)), qo));
  std::vector<Inputs> in;
  for (int r = 0; r < G; ++r) in.push_back(test::random_inputs(9 + r, 64, 1, 4, DType::BF16, 40 + r));
  std::vector<HostTensor> outs(G);
  run_threads(G, [&](int rank, std::shared_ptr<Transport> tr) {
    EpConfig ec;
    ec.num_global_experts = 4;
    ec.hidden = 64;
    ec.topk = 1;
    ec.max_tokens_per_rank = 16;
    ec.apply_router_weight_on_input = true;
    ExpertParallelLayer ep(tr, full.config, parts[rank].weights(), ec, LayerOptions{Backend::CPU, 1});
    outs[rank] = HostTensor(DType::BF16, {9 + rank, 64});
    EpRunArgs a;
    a.hidden_states = in[rank].hidden.view();
    a.topk_ids = in[rank].ids.view();
    a.topk_weights = in[rank].weights.view();
    a.output = outs[rank].view();
    ep.run(a);
  });
  for (int r = 0; r < G; ++r) {
    Inputs x = in[r];
    x.on_input = true;
    // top-1: one partial per token, so the EP output is the single layer's, bit for bit.
    EXPECT_TRUE(test::bitwise_equal(outs[r], test::run_layer(full, x, CpuPrecision::FAST, 1)));
  }
}

TEST(EpCpu, Validation) {
  LayerConfig cfg;
  const FloatLayer fl = random_float_layer(cfg, 4, 64, 32, 5, false, 0.1f);
  QuantizeOptions qo;
  qo.format = Format::BF16;
  const LayerFile full = quantize_layer(fl, qo);
  run_threads(1, [&](int, std::shared_ptr<Transport> tr) {
    EpConfig ec;
    ec.num_global_experts = 4;
    ec.hidden = 64;
    ec.topk = 2;
    ec.max_tokens_per_rank = 4;
    EXPECT_NO_THROW(ExpertParallelLayer(tr, full.config, full.weights(), ec));
    EpConfig bad = ec;
    bad.fp8_dispatch = true;  // bf16 layer
    EXPECT_THROW(ExpertParallelLayer(tr, full.config, full.weights(), bad), InvalidArgument);
    bad = ec;
    bad.expert_owner = {0, 0, 1, 0};  // rank 1 does not exist
    EXPECT_THROW(ExpertParallelLayer(tr, full.config, full.weights(), bad), InvalidArgument);
    bad = ec;
    bad.hidden = 32;
    EXPECT_THROW(ExpertParallelLayer(tr, full.config, full.weights(), bad), InvalidArgument);
    ExpertParallelLayer ep(tr, full.config, full.weights(), ec);
    Inputs in = test::random_inputs(5, 64, 2, 4, DType::BF16, 1);  // 5 > max_tokens_per_rank
    HostTensor out(DType::BF16, {5, 64});
    EpRunArgs a;
    a.hidden_states = in.hidden.view();
    a.topk_ids = in.ids.view();
    a.topk_weights = in.weights.view();
    a.output = out.view();
    EXPECT_THROW(ep.run(a), InvalidArgument);
    EXPECT_THROW(ep.compute(a), Error);  // no dispatch yet
  });
  EXPECT_FALSE(nccl_available() && false);
  EXPECT_EQ(EpUniqueId::from_hex(EpUniqueId{}.to_hex()).bytes, EpUniqueId{}.bytes);
  EXPECT_THROW(EpUniqueId::from_hex("12"), InvalidArgument);
}

TEST(EpCpu, AbortedRankReleasesThePeers) {
  // A rank that throws before a collective must not leave the others waiting forever.
  EXPECT_THROW(run_threads(3,
                           [](int rank, std::shared_ptr<Transport> tr) {
                             if (rank == 1) throw InvalidArgument("x", "y", "z");
                             tr->barrier(nullptr);
                           }),
               InvalidArgument);
}

// ---------------------------------------------------------------- HostBarrier (ep.hpp)

TEST(HostBarrier, NoThreadPassesBeforeAllArrive) {
  constexpr int kThreads = 4, kRounds = 200;
  HostBarrier b(kThreads);
  std::atomic<int> arrived{0};
  std::atomic<int> early{0};  // a thread that saw fewer arrivals than the round needs
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&] {
      for (int r = 0; r < kRounds; ++r) {
        arrived.fetch_add(1);
        EXPECT_TRUE(b.wait());
        if (arrived.load() < kThreads * (r + 1)) early.fetch_add(1);
        EXPECT_TRUE(b.wait());  // nobody starts round r + 1 before everyone checked round r
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(arrived.load(), kThreads * kRounds);
  EXPECT_EQ(early.load(), 0);
}

TEST(HostBarrier, AFailedRankFailsThatRoundForEveryone) {
  constexpr int kThreads = 3;
  HostBarrier b(kThreads);
  std::mutex mu;
  std::vector<std::vector<bool>> seen(kThreads);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      std::vector<bool> mine;
      for (int r = 0; r < 5; ++r) mine.push_back(b.wait(!(t == 1 && r == 2)));  // rank 1 fails round 2
      std::lock_guard<std::mutex> lk(mu);
      seen[t] = mine;
    });
  for (auto& t : ts) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(seen[t], (std::vector<bool>{true, true, false, true, true})) << t;
}

TEST(HostBarrier, AbortReleasesWaitersAndLaterWaits) {
  HostBarrier b(3);
  std::atomic<int> released{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 2; ++t)  // the third party never comes
    ts.emplace_back([&] {
      EXPECT_FALSE(b.wait());
      released.fetch_add(1);
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(released.load(), 0);  // still waiting for the third
  b.abort();
  for (auto& t : ts) t.join();
  EXPECT_EQ(released.load(), 2);
  EXPECT_FALSE(b.wait());
}

TEST(HostBarrier, OnePartyNeverWaitsAndZeroIsRefused) {
  HostBarrier one(1);
  EXPECT_TRUE(one.wait());
  EXPECT_FALSE(one.wait(false));
  EXPECT_TRUE(one.wait());
  EXPECT_EQ(one.parties(), 1);
  EXPECT_THROW(HostBarrier(0), InvalidArgument);
}

}  // namespace
}  // namespace fusedmoe::eptest
