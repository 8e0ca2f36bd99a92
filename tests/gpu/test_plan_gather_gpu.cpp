// Decode-sized calls build the routing plan inside the gather kernel (launch_plan_gather): every
// block places the (at most 256) slots itself and block 0 writes the plan arrays. It must give the
// same plan arrays as launch_plan and the same operand rows (and per-token scales) as
// launch_gather after it, for ids out of range, an expert map with unmapped experts, every
// vector gather format (nvfp4 too: each row's expert from the block's own plan), with and without
// the router weight on the input. The fused kernel writes
// into poisoned buffers, so a value it leaves unwritten cannot pass.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/moe_kernels.hpp"
#include "fusedmoe/codecs.hpp"
#include "fusedmoe/error.hpp"
#include "gpu/device_plan.hpp"
#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

using cuda::Fp8Quant;
using cuda::Operand;

struct Format {
  const char* name;
  DType x_dtype;
  Operand op;
  Fp8Quant quant;
};
const Format kFormats[] = {
    {"bf16", DType::BF16, Operand::BF16, Fp8Quant::NONE},
    {"f32_to_fp16", DType::F32, Operand::FP16, Fp8Quant::NONE},
    {"fp8_static", DType::BF16, Operand::FP8, Fp8Quant::TENSOR_STATIC},
    {"fp8_dynamic", DType::BF16, Operand::FP8, Fp8Quant::TENSOR_DYNAMIC},
    {"fp8_row", DType::BF16, Operand::FP8, Fp8Quant::ROW},
    {"f32_row_to_bf16", DType::F32, Operand::BF16, Fp8Quant::ROW},
    {"nvfp4", DType::BF16, Operand::BF16, Fp8Quant::NVFP4},  // W4A4: each row's expert's input scale
};

// slots, local experts, the Format index, expert map (num_global = 2E, a third unmapped), on input
using Param = std::tuple<int, int, int, bool, bool>;

template <class T>
DeviceBuffer upload_vec(const std::vector<T>& v) {
  DeviceBuffer b(v.size() * sizeof(T) + 16);
  if (!v.empty()) b.upload(v.data(), v.size() * sizeof(T));
  return b;
}

void expect_same(const DeviceBuffer& a, const DeviceBuffer& b, size_t bytes, const std::string& what) {
  std::vector<uint8_t> ha(bytes), hb(bytes);
  if (bytes == 0) return;
  a.download(ha.data(), bytes);
  b.download(hb.data(), bytes);
  for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(ha[i], hb[i]) << what << ": first difference at byte " << i;
}

std::string name_of(const Param& q) {
  return std::string(kFormats[std::get<2>(q)].name) + "_slots" + std::to_string(std::get<0>(q)) + "_E" +
         std::to_string(std::get<1>(q)) + (std::get<3>(q) ? "_map" : "") + (std::get<4>(q) ? "_oninput" : "");
}

class PlanGather : public ::testing::TestWithParam<Param> {};

TEST_P(PlanGather, SamePlanAndRowsAsPlanThenGather) {
  FMOE_REQUIRE_GPU();
  const auto [slots, E, fi, mapped, on_input] = GetParam();
  const Format& f = kFormats[fi];
  const bool nvfp4 = f.quant == Fp8Quant::NVFP4;
  // K: 129 vectors of 8; nvfp4 65 blocks of 16.
  const int64_t topk = slots % 4 == 0 ? 4 : 1, M = slots / topk, K = nvfp4 ? 1040 : 1032;
  std::mt19937 rng(static_cast<uint32_t>(slots * 7 + E * 13 + fi * 3 + mapped * 101 + on_input * 211));
  const int64_t num_global = mapped ? 2 * E : E;
  std::vector<int32_t> emap;
  if (mapped) {
    emap.resize(num_global);
    for (int64_t g = 0; g < num_global; ++g) emap[g] = g % 3 == 1 ? -1 : static_cast<int32_t>((g * 5) % E);
  }
  std::vector<int32_t> ids(slots);
  for (auto& v : ids) {
    const uint32_t u = rng() % 16;
    v = u == 0 ? -1 : u == 1 ? static_cast<int32_t>(num_global + rng() % 3)  // out of range
                             : static_cast<int32_t>(rng() % (num_global / 2));  // crowd a few experts
  }

  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint8_t> x(M * K * (f.x_dtype == DType::F32 ? 4 : 2));
  for (int64_t i = 0; i < M * K; ++i) {
    const float v = nd(rng) * (i % 97 == 5 ? 40.0f : 1.0f);
    if (f.x_dtype == DType::F32) {
      std::memcpy(&x[4 * i], &v, 4);
    } else {
      const uint16_t b = float_to_bf16_bits(v);
      std::memcpy(&x[2 * i], &b, 2);
    }
  }
  std::vector<float> w(slots);
  for (auto& v : w) v = 0.1f + static_cast<float>(rng() % 1000) / 1000.0f;
  DeviceBuffer x_d = upload_vec(x), w_d = upload_vec(w), scale_d = upload_vec(std::vector<float>{0.0173f});
  float amax = 9.5f;  // TENSOR_DYNAMIC: the amax bits the amax kernel would have left
  uint32_t amax_bits;
  std::memcpy(&amax_bits, &amax, 4);
  DeviceBuffer amax_d = upload_vec(std::vector<uint32_t>{amax_bits});
  std::vector<float> in_scale(E);  // nvfp4 input scales per local expert
  for (auto& v : in_scale) v = 0.002f + static_cast<float>(rng() % 1000) * 1e-5f;
  DeviceBuffer in_scale_d = upload_vec(in_scale);

  const int64_t code_bytes = K * (f.op == Operand::FP8 ? 1 : 2);
  DevicePlan ref(ids, E, emap, num_global);  // launch_plan
  DevicePlan got(ids, E, emap, num_global);  // its launch_plan output is poisoned below
  for (DeviceBuffer* b : {&got.slot_row, &got.row_slot, &got.row_expert, &got.offsets, &got.tiles})
    FMOE_CUDA(cudaMemset(b->get(), 0xEE, b->bytes()));
  DeviceBuffer out_ref(slots * code_bytes), out_got(slots * code_bytes), rs_ref(slots * 4 + 16), rs_got(slots * 4 + 16);
  FMOE_CUDA(cudaMemset(out_got.get(), 0x7F, out_got.bytes()));
  FMOE_CUDA(cudaMemset(rs_got.get(), 0x7F, rs_got.bytes()));

  auto params = [&](DevicePlan& plan, DeviceBuffer& out, DeviceBuffer& rs) {
    cuda::GatherParams gp = plan.gather_params(x_d.get(), f.x_dtype, K, topk, static_cast<const float*>(w_d.get()),
                                                on_input, out.get(), f.op, f.quant);
    gp.row_scale = static_cast<float*>(rs.get());
    if (f.quant == Fp8Quant::TENSOR_STATIC) gp.scale = {static_cast<const float*>(scale_d.get()), false};
    if (f.quant == Fp8Quant::TENSOR_DYNAMIC) gp.scale = {static_cast<const float*>(amax_d.get()), true};
    if (nvfp4) {
      // The plan kernel's row_expert; the fused kernel's (poisoned until its block 0 writes it)
      // must not be read: it takes each row's expert from its own plan.
      gp.block.row_expert = plan.p.row_expert;
      gp.nvfp4_input_scale = static_cast<const float*>(in_scale_d.get());
    }
    return gp;
  };
  const cuda::GatherParams gp_ref = params(ref, out_ref, rs_ref), gp_got = params(got, out_got, rs_got);
  const bool applies = cuda::plan_gather_fused_applies(gp_got, slots);
  if (f.quant == Fp8Quant::TENSOR_DYNAMIC && on_input) {
    // The weighted rows' amax reads the plan before the gather: that call keeps the plan kernel.
    EXPECT_FALSE(applies);
    EXPECT_THROW(cuda::launch_plan_gather(static_cast<const int32_t*>(got.ids.get()), nullptr, slots, E, num_global,
                                          got.p, gp_got, nullptr),
                 Error);
    return;
  }
  ASSERT_TRUE(applies);
  cuda::launch_gather(gp_ref, slots, nullptr);
  cuda::launch_plan_gather(static_cast<const int32_t*>(got.ids.get()), static_cast<const int32_t*>(got.emap.get()),
                           slots, E, num_global, got.p, gp_got, nullptr);
  FMOE_CUDA(cudaDeviceSynchronize());

  const auto offsets = download<int32_t>(ref.offsets, E + 1);
  const int64_t rows = offsets[E];
  expect_same(ref.offsets, got.offsets, (E + 1) * 4, "expert_offsets");
  expect_same(ref.tiles, got.tiles, (E + 1) * 4, "tile_offsets");
  expect_same(ref.slot_row, got.slot_row, slots * 4, "slot_row");
  expect_same(ref.row_slot, got.row_slot, rows * 4, "row_slot");
  expect_same(ref.row_expert, got.row_expert, rows * 4, "row_expert");
  expect_same(out_ref, out_got, rows * code_bytes, "operand rows");
  if (f.quant == Fp8Quant::ROW) expect_same(rs_ref, rs_got, rows * 4, "row scales");
}

// 1 slot (M = 1, top-1), 8 and 16 (one or a few decode tokens), 31 (a partial warp), 32 (the
// one-warp limit), 33 / 100 / 256 (the whole block's plan, 256 its limit); E = 4 crowds the
// slots on a few experts, E = 256 spreads them.
INSTANTIATE_TEST_SUITE_P(
    Cases, PlanGather,
    ::testing::Combine(::testing::Values(1, 8, 16, 31, 32, 33, 100, 256), ::testing::Values(4, 256), ::testing::Range(0, 7),
                       ::testing::Bool(), ::testing::Bool()),
    [](const auto& info) { return name_of(info.param); });

// Past 256 slots, or for a gather that is not one of the vector kernels, the plan kernel stays.
TEST(PlanGatherRule, RefusesWhatItCannotPlace) {
  cuda::GatherParams gp;
  gp.x_dtype = DType::BF16;
  gp.K = 1024;
  gp.op = Operand::BF16;
  gp.quant = Fp8Quant::NONE;
  gp.x = reinterpret_cast<const void*>(uintptr_t{256});
  gp.out = reinterpret_cast<void*>(uintptr_t{512});
  EXPECT_TRUE(cuda::plan_gather_fused_applies(gp, 32));
  EXPECT_TRUE(cuda::plan_gather_fused_applies(gp, 256));
  EXPECT_FALSE(cuda::plan_gather_fused_applies(gp, 257));
  EXPECT_FALSE(cuda::plan_gather_fused_applies(gp, 0));
  gp.quant = Fp8Quant::BLOCK;
  gp.op = Operand::FP8;
  EXPECT_FALSE(cuda::plan_gather_fused_applies(gp, 8));
  gp.quant = Fp8Quant::NONE;
  gp.op = Operand::BF16;
  gp.K = 1020;  // not a multiple of 8: the general gather
  EXPECT_FALSE(cuda::plan_gather_fused_applies(gp, 8));
  gp.quant = Fp8Quant::NVFP4;  // the nvfp4 vector gather: 16-wide blocks
  gp.K = 1040;
  EXPECT_TRUE(cuda::plan_gather_fused_applies(gp, 8));
  gp.K = 1032;
  EXPECT_FALSE(cuda::plan_gather_fused_applies(gp, 8));
}

}  // namespace
}  // namespace fusedmoe::gputest
