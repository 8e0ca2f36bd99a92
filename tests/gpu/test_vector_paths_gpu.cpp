// The elementwise stages have a vector kernel (16-byte accesses, whole rows or tokens per block)
// and a general one for shapes or pointers the vector one does not take. Both must give the same
// bits: here each vector kernel runs next to the general one on the same data (the general one
// is selected by handing the launcher an input pointer shifted off its 16-byte alignment), for
// the fp8-block, per-token (ROW) and nvfp4 quantisers of both GEMM operands and for finalize. The
// routing plan (whose placement is spread over warps) is checked against the order it must
// produce.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/moe_kernels.hpp"
#include "fusedmoe/codecs.hpp"
#include "gpu/device_plan.hpp"
#include "gpu/gpu_test_util.hpp"

namespace fusedmoe::gputest {
namespace {

// A device copy of host bytes starting `shift` bytes into a fresh allocation (cudaMalloc is
// 256-byte aligned, so a shift of 2 or 4 breaks the vector kernels' alignment).
struct Shifted {
  DeviceBuffer buf;
  void* ptr = nullptr;
};
Shifted upload_shifted(const void* src, size_t bytes, size_t shift) {
  Shifted s{DeviceBuffer(bytes + 16), nullptr};
  s.ptr = static_cast<char*>(s.buf.get()) + shift;
  FMOE_CUDA(cudaMemcpy(s.ptr, src, bytes, cudaMemcpyHostToDevice));
  return s;
}
template <class T>
DeviceBuffer upload_vec(const std::vector<T>& v) {
  DeviceBuffer b(v.size() * sizeof(T) + 16);
  if (!v.empty()) b.upload(v.data(), v.size() * sizeof(T));
  return b;
}

// Random values of mixed magnitude per 128-group (scales differ), one group in 9 all zero.
std::vector<float> mixed_values(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  float mag = 1.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 128 == 0) mag = std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10);
    v[i] = (i / 128) % 9 == 4 ? 0.0f : nd(rng) * mag;
  }
  return v;
}

std::vector<int32_t> random_ids(int64_t slots, int E, std::mt19937& rng) {
  std::vector<int32_t> ids(slots);
  for (auto& v : ids) v = rng() % 17 == 0 ? -1 : static_cast<int32_t>(rng() % (E - 1));  // expert E-1 empty
  return ids;
}

void expect_same_bytes(const DeviceBuffer& a, const void* b_dev, size_t bytes, const char* what) {
  std::vector<uint8_t> ha(bytes), hb(bytes);
  FMOE_CUDA(cudaMemcpy(ha.data(), a.get(), bytes, cudaMemcpyDeviceToHost));
  FMOE_CUDA(cudaMemcpy(hb.data(), b_dev, bytes, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(ha[i], hb[i]) << what << ": first difference at byte " << i;
}

// Runs a quantiser on the aligned input (vector kernel) and on the shifted one (general kernel),
// each into its own codes / scales, and requires the same bytes for every row the plan made.
// run(input, codes, scales) launches one of them; a row has code_bytes of codes and scale_bytes
// of scales.
template <class Run>
void expect_vector_equals_general(const DevicePlan& plan, int E, int64_t code_bytes, int64_t scale_bytes,
                                  const void* aligned, const void* shifted, DeviceBuffer& q_vec, DeviceBuffer& q_gen,
                                  DeviceBuffer& s_vec, DeviceBuffer& s_gen, Run run) {
  run(aligned, q_vec, s_vec);
  run(shifted, q_gen, s_gen);
  FMOE_CUDA(cudaDeviceSynchronize());
  const int64_t rows = download<int32_t>(plan.offsets, E + 1)[E];
  ASSERT_GT(rows, 0);
  expect_same_bytes(q_vec, q_gen.get(), rows * code_bytes, "codes");
  expect_same_bytes(s_vec, s_gen.get(), rows * scale_bytes, "scales");
}

// A 16-bit operand stored in a 4-bit kernel's k order o (w4_kperm.cuh) holds the plain operand's
// value of every element at that element's place: rows of `cols` (% 64 == 0).
void expect_korder_of(const DeviceBuffer& ordered, const DeviceBuffer& plain, int64_t rows, int64_t cols, cuda::KOrder o) {
  ASSERT_EQ(cols % 64, 0);
  const auto k = download<uint16_t>(ordered, rows * cols), v = download<uint16_t>(plain, rows * cols);
  int bad = 0;
  for (int64_t i = 0; i < rows * cols; ++i)
    if (k[static_cast<size_t>(cuda::korder_pos(i, o))] != v[static_cast<size_t>(i)] && ++bad <= 5)
      ADD_FAILURE() << "element " << i << " (row " << i / cols << "): ordered " << k[cuda::korder_pos(i, o)]
                    << ", plain " << v[i];
  EXPECT_EQ(bad, 0);
}

int64_t operand_bytes(cuda::Operand op) { return op == cuda::Operand::FP8 ? 1 : 2; }

// What a quantiser writes per row of `cols` values: the operand bytes, and the scale bytes (BLOCK:
// one float per 128 columns; ROW: one float; NVFP4: none, its operand holds e2m1 x e4m3 values).
struct RowBytes {
  int64_t code, scale;
};
RowBytes row_bytes(cuda::Fp8Quant quant, cuda::Operand op, int64_t cols) {
  const int64_t scale = quant == cuda::Fp8Quant::BLOCK ? cols / 128 * 4 : (quant == cuda::Fp8Quant::NVFP4 ? 0 : 4);
  return {cols * operand_bytes(op), scale};
}

// nvfp4 input scales [E] (the activations' global scale is their inverse), on the device.
DeviceBuffer random_input_scales(int E, std::mt19937& rng) {
  std::vector<float> v(E);
  for (auto& x : v) x = 0.002f * static_cast<float>(1 + rng() % 50);
  return upload_vec(v);
}

// ---------------------------------------------------------------- routing plan

// Rows are grouped by local expert and ordered by slot inside an expert; slots whose id is out
// of range or unmapped have no row. Up to 32 slots the one-warp plan (plan_tiny_kernel) runs:
// E = 4 crowds all 32 on a few experts, E = 3000 spreads them. Up to 256 the same kernel places
// them with the whole block (small_plan_block: 33 .. 256, a crowded 100, 257 past it). Up to 2048
// slots (kBlockPlanSlots) the plan is one block - its slots' experts in shared memory up to 1024
// slots, in global scratch above; E = 3000 leaves room for only a few placing warps there - and
// three chunked kernels past that (2049, 20000, 65536); expert counts up to kMaxExperts (4096).
TEST(PlanGpu, RowsByExpertThenSlot) {
  FMOE_REQUIRE_GPU();
  struct P {
    int E;
    int64_t slots;
    bool mapped;
  };
  for (const P c : {P{256, 1, false}, P{128, 8, true}, P{4, 32, false}, P{3000, 31, true}, P{256, 33, false},
                    P{256, 64, false}, P{3000, 65, true}, P{8, 37, false}, P{4, 100, true}, P{128, 255, false},
                    P{3000, 256, true}, P{128, 257, false},
                    P{256, 1024, false}, P{256, 1025, true}, P{256, 2048, true}, P{3000, 2048, false},
                    P{256, 2049, true}, P{256, 20000, false},
                    // Expert counts whose warps' counts filled the one-block plan's 48 KB exactly
                    // (launch failure before the static shared memory was reserved).
                    P{512, 1000, false}, P{512, 2048, true}, P{384, 1500, false}, P{2816, 1000, true},
                    P{4096, 2048, false}, P{4096, 5000, true},
                    P{3000, 900, true}, P{3000, 20000, false}, P{128, 65536, true}}) {
    SCOPED_TRACE("E=" + std::to_string(c.E) + " slots=" + std::to_string(c.slots) + (c.mapped ? " mapped" : ""));
    std::mt19937 rng(static_cast<uint32_t>(c.E * 7 + c.slots));
    const int64_t num_global = c.mapped ? 2 * c.E : c.E;
    std::vector<int32_t> emap;
    if (c.mapped) {
      emap.resize(num_global);
      for (int64_t g = 0; g < num_global; ++g) emap[g] = g % 2 ? static_cast<int32_t>(g / 2) : (g % 4 ? -1 : c.E + 5);
    }
    std::vector<int32_t> ids(c.slots);
    // Skewed: half the slots on experts 0..3, a few ids out of range.
    for (auto& v : ids) {
      const uint32_t u = rng();
      v = u % 31 == 0 ? static_cast<int32_t>(num_global + u % 3) : static_cast<int32_t>(u % 2 ? u % 8 : u % num_global);
    }
    DevicePlan plan(ids, c.E, emap, num_global);
    FMOE_CUDA(cudaDeviceSynchronize());
    std::vector<int32_t> local(c.slots), count(c.E, 0);
    for (int64_t i = 0; i < c.slots; ++i) {
      const int32_t g = ids[i];
      int32_t e = (g >= 0 && g < num_global) ? (c.mapped ? emap[g] : g) : -1;
      if (e >= c.E) e = -1;
      local[i] = e;
      if (e >= 0) ++count[e];
    }
    std::vector<int32_t> offsets(c.E + 1, 0);
    for (int e = 0; e < c.E; ++e) offsets[e + 1] = offsets[e] + count[e];
    const auto got_off = download<int32_t>(plan.offsets, c.E + 1);
    ASSERT_EQ(got_off, offsets);
    std::vector<int32_t> tiles(c.E + 1, 0);  // the SIMT GEMM's first tile of each expert
    for (int e = 0; e < c.E; ++e) tiles[e + 1] = tiles[e] + (count[e] + cuda::kSimtTileM - 1) / cuda::kSimtTileM;
    ASSERT_EQ(download<int32_t>(plan.tiles, c.E + 1), tiles);
    const auto slot_row = download<int32_t>(plan.slot_row, c.slots);
    const auto row_slot = download<int32_t>(plan.row_slot, c.slots);
    const auto row_expert = download<int32_t>(plan.row_expert, c.slots);
    std::vector<int32_t> next(offsets.begin(), offsets.end() - 1);
    for (int64_t i = 0; i < c.slots; ++i) {
      const int32_t want = local[i] >= 0 ? next[local[i]]++ : -1;
      ASSERT_EQ(slot_row[i], want) << "slot " << i;
      if (want >= 0) {
        ASSERT_EQ(row_slot[want], i) << "row " << want;
        ASSERT_EQ(row_expert[want], local[i]) << "row " << want;
      }
    }
  }
}

// ---------------------------------------------------------------- fp8-block GEMM1 operand

// The GEMM1 operand of one quantisation mode (BLOCK, ROW, NVFP4, NONE or TENSOR_STATIC) and
// operand type from the vector and the general gather kernel (M tokens, top-4).
// ko: both kernels store the 16-bit operand in a 4-bit kernel's k order, and the vector kernel's
// operand must be the general kernel's plain one so permuted.
void gather_paths(DType dt, bool on_input, int64_t K, cuda::Fp8Quant quant, cuda::Operand op, bool ue8m0,
                  int64_t M = 50, bool token_major = false, bool shared_input_scales = false,
                  cuda::KOrder ko = cuda::KOrder::NATURAL) {
  const int64_t topk = 4;
  const int E = 6;
  std::mt19937 rng(static_cast<uint32_t>(K + 2 * on_input + 4 * ue8m0 + 8 * static_cast<int>(op)));
  const auto xf = mixed_values(M * K, rng);
  std::vector<uint8_t> xb;  // x in its dtype
  if (dt == DType::F32) {
    xb.resize(xf.size() * 4);
    std::memcpy(xb.data(), xf.data(), xb.size());
  } else {
    xb.resize(xf.size() * 2);
    for (size_t i = 0; i < xf.size(); ++i) {
      const uint16_t b = float_to_bf16_bits(xf[i]);
      std::memcpy(&xb[2 * i], &b, 2);
    }
  }
  const auto ids = random_ids(M * topk, E, rng);
  std::vector<float> w(M * topk);
  for (auto& v : w) v = 0.1f + static_cast<float>(rng() % 1000) / 1000.0f;
  DevicePlan plan(ids, E);
  DeviceBuffer w_d = upload_vec(w);
  const bool block = quant == cuda::Fp8Quant::BLOCK, nvfp4 = quant == cuda::Fp8Quant::NVFP4;
  const auto [code_bytes, scale_bytes] = row_bytes(quant, op, K);
  const int64_t slots = M * topk;
  // nvfp4 global scales: random per expert, or (shared_input_scales) one for all experts but
  // expert 1 (random_ids draws experts 0 .. E - 2), so that tokens mix a shared scale, quantised
  // once for several slots, with a distinct one.
  DeviceBuffer in_scale_d = random_input_scales(E, rng);
  if (shared_input_scales) {
    std::vector<float> v(E, 0.0131f);
    v[1] = 0.0077f;
    in_scale_d = upload_vec(v);
  }
  DeviceBuffer tensor_scale_d = upload_vec(std::vector<float>{0.0173f});  // TENSOR_STATIC
  Shifted x_aligned = upload_shifted(xb.data(), xb.size(), 0);
  Shifted x_shifted = upload_shifted(xb.data(), xb.size(), dt == DType::F32 ? 4 : 2);
  DeviceBuffer q_vec(slots * code_bytes), q_gen(slots * code_bytes), s_vec(slots * scale_bytes + 16),
      s_gen(slots * scale_bytes + 16);
  FMOE_CUDA(cudaMemset(q_vec.get(), 0xA5, slots * code_bytes));
  FMOE_CUDA(cudaMemset(q_gen.get(), 0x5A, slots * code_bytes));
  cuda::KOrder use_ko = ko;
  auto run = [&](const void* x, DeviceBuffer& q, DeviceBuffer& s) {
    cuda::GatherParams gp =
        plan.gather_params(x, dt, K, topk, static_cast<const float*>(w_d.get()), on_input, q.get(), op, quant);
    gp.korder = use_ko;
    if (block) gp.block = {static_cast<float*>(s.get()), plan.p.row_expert, plan.p.expert_offsets, ue8m0};
    else if (nvfp4) gp.block.row_expert = plan.p.row_expert;
    else gp.row_scale = static_cast<float*>(s.get());
    if (quant == cuda::Fp8Quant::TENSOR_STATIC) gp.scale = {static_cast<const float*>(tensor_scale_d.get()), false};
    gp.nvfp4_input_scale = static_cast<const float*>(in_scale_d.get());
    // The aligned x takes the token-major gather where the case asks for it, the shifted x never.
    EXPECT_EQ(cuda::token_gather_applies(gp), token_major && x == x_aligned.ptr);
    cuda::launch_gather(gp, slots, nullptr);
  };
  expect_vector_equals_general(plan, E, code_bytes, scale_bytes, x_aligned.ptr, x_shifted.ptr, q_vec, q_gen, s_vec,
                               s_gen, run);
  if (ko != cuda::KOrder::NATURAL) {
    DeviceBuffer q_plain(slots * code_bytes), s_plain(slots * scale_bytes + 16);
    use_ko = cuda::KOrder::NATURAL;
    run(x_shifted.ptr, q_plain, s_plain);
    FMOE_CUDA(cudaDeviceSynchronize());
    expect_korder_of(q_vec, q_plain, download<int32_t>(plan.offsets, E + 1)[E], K, ko);
  }
}

class GatherBlockPaths : public ::testing::TestWithParam<std::tuple<DType, bool, bool, int64_t>> {};

TEST_P(GatherBlockPaths, VectorEqualsGeneral) {
  FMOE_REQUIRE_GPU();
  const auto [dt, on_input, ue8m0, K] = GetParam();
  gather_paths(dt, on_input, K, cuda::Fp8Quant::BLOCK, cuda::Operand::FP8, ue8m0);
}

// K = 384: 48 lanes, the second warp half inside the row; K = 2176: 272 lanes, two block steps.
INSTANTIATE_TEST_SUITE_P(Shapes, GatherBlockPaths,
                         ::testing::Combine(::testing::Values(DType::BF16, DType::F32), ::testing::Bool(),
                                            ::testing::Bool(), ::testing::Values(int64_t{384}, int64_t{2176})),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == DType::F32 ? "f32" : "bf16") +
                                  (std::get<1>(info.param) ? "_oninput" : "") + (std::get<2>(info.param) ? "_ue8m0" : "") +
                                  "_K" + std::to_string(std::get<3>(info.param));
                         });

// Per-token fp8 (ROW): fp8 codes (fp8-channel) and their values in bf16 / fp16 (mxfp4-fp8,
// w4a8-int4); K = 2056 is not a multiple of the block's 256 x 8 columns.
class GatherRowPaths : public ::testing::TestWithParam<std::tuple<DType, bool, cuda::Operand>> {};

TEST_P(GatherRowPaths, VectorEqualsGeneral) {
  FMOE_REQUIRE_GPU();
  const auto [dt, on_input, op] = GetParam();
  gather_paths(dt, on_input, 2056, cuda::Fp8Quant::ROW, op, false);
}

INSTANTIATE_TEST_SUITE_P(Cases, GatherRowPaths,
                         ::testing::Combine(::testing::Values(DType::BF16, DType::F32), ::testing::Bool(),
                                            ::testing::Values(cuda::Operand::FP8, cuda::Operand::BF16,
                                                              cuda::Operand::FP16)),
                         [](const auto& info) {
                           const cuda::Operand op = std::get<2>(info.param);
                           return std::string(std::get<0>(info.param) == DType::F32 ? "f32" : "bf16") +
                                  (std::get<1>(info.param) ? "_oninput" : "") +
                                  (op == cuda::Operand::FP8 ? "_fp8" : op == cuda::Operand::BF16 ? "_bf16" : "_fp16");
                         });

// Conversion (NONE: bf16 / fp16 operands) and static per-tensor fp8 (TENSOR_STATIC), 80 tokens x
// top-4 = 320 rows: the row-walking vector kernel (>= 256 rows); K = 2056: 257 vectors, not a
// multiple of the block's 256 threads.
class GatherVecPaths : public ::testing::TestWithParam<std::tuple<DType, bool, int>> {};

TEST_P(GatherVecPaths, VectorEqualsGeneral) {
  FMOE_REQUIRE_GPU();
  const auto [dt, on_input, mode] = GetParam();
  const cuda::Fp8Quant quant = mode == 2 ? cuda::Fp8Quant::TENSOR_STATIC : cuda::Fp8Quant::NONE;
  const cuda::Operand op = mode == 0 ? cuda::Operand::BF16 : mode == 1 ? cuda::Operand::FP16 : cuda::Operand::FP8;
  gather_paths(dt, on_input, 2056, quant, op, false, 80);
}

INSTANTIATE_TEST_SUITE_P(Cases, GatherVecPaths,
                         ::testing::Combine(::testing::Values(DType::BF16, DType::F32), ::testing::Bool(),
                                            ::testing::Values(0, 1, 2)),
                         [](const auto& info) {
                           const int mode = std::get<2>(info.param);
                           return std::string(std::get<0>(info.param) == DType::F32 ? "f32" : "bf16") +
                                  (std::get<1>(info.param) ? "_oninput" : "") +
                                  (mode == 0 ? "_bf16" : mode == 1 ? "_fp16" : "_fp8_static");
                         });

// The token-major gathers (kTokenGatherMinTokens tokens, top-4, no router weight on the input):
// each token read once and stored to all its rows, the same codes and scales as the general gather;
// with the router weight on the input the row walks serve the call (the token's rows differ).
// Modes: NONE to bf16 / fp16, TENSOR_STATIC, ROW to fp8 / bf16 values, BLOCK (K = 2176: 17 groups),
// NVFP4 to bf16 values with random per-expert global scales / with scales shared by most experts
// (K = 2064: 129 16-wide blocks).
const char* const kTokenModes[] = {"_bf16",  "_fp16",     "_fp8_static",        "_row_fp8",
                                   "_row_bf16", "_block", "_nvfp4_per_expert", "_nvfp4_shared"};
class GatherTokenPaths : public ::testing::TestWithParam<std::tuple<DType, bool, int>> {};

TEST_P(GatherTokenPaths, TokenMajorEqualsGeneral) {
  FMOE_REQUIRE_GPU();
  const auto [dt, on_input, mode] = GetParam();
  const cuda::Fp8Quant quant = mode == 2   ? cuda::Fp8Quant::TENSOR_STATIC
                               : mode >= 6 ? cuda::Fp8Quant::NVFP4
                               : mode >= 5 ? cuda::Fp8Quant::BLOCK
                               : mode >= 3 ? cuda::Fp8Quant::ROW
                                           : cuda::Fp8Quant::NONE;
  const cuda::Operand op = mode == 0 || mode == 4 || mode >= 6 ? cuda::Operand::BF16
                           : mode == 1                          ? cuda::Operand::FP16
                                                                : cuda::Operand::FP8;
  const int64_t K = mode == 5 ? 2176 : mode >= 6 ? 2064 : 2056;
  gather_paths(dt, on_input, K, quant, op, false, cuda::kTokenGatherMinTokens, !on_input, mode == 7);
}

INSTANTIATE_TEST_SUITE_P(Cases, GatherTokenPaths,
                         ::testing::Combine(::testing::Values(DType::BF16, DType::F32), ::testing::Bool(),
                                            ::testing::Range(0, 8)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == DType::F32 ? "f32" : "bf16") +
                                  (std::get<1>(info.param) ? "_oninput" : "") + kTokenModes[std::get<2>(info.param)];
                         });

// The dynamic per-tensor amax of x (fp8-tensor without input scales): the 16-byte vector kernel
// (aligned x) and the element-wise one (x shifted by one element) give the same bits, NaN skipped.
TEST(GatherAmaxGpu, VectorEqualsElementwise) {
  FMOE_REQUIRE_GPU();
  for (DType dt : {DType::BF16, DType::F32}) {
    const int64_t M = 300, K = 2056;
    std::mt19937 rng(static_cast<uint32_t>(dt == DType::F32 ? 11 : 12));
    auto xf = mixed_values(M * K, rng);
    xf[12345] = std::nanf("");
    xf[M * K - 1] = -1.0e6f;  // the largest magnitude (mixed_values stays below 2^10 * 6), in the last vector
    std::vector<uint8_t> xb(xf.size() * (dt == DType::F32 ? 4 : 2));
    float want = 0.0f;  // amax of the stored values, NaN skipped
    for (size_t i = 0; i < xf.size(); ++i) {
      float v = xf[i];
      if (dt == DType::F32) {
        std::memcpy(&xb[4 * i], &v, 4);
      } else {
        const uint16_t b = float_to_bf16_bits(v);
        std::memcpy(&xb[2 * i], &b, 2);
        v = bf16_bits_to_float(b);
      }
      if (v == v) want = std::max(want, std::fabs(v));
    }
    Shifted x_aligned = upload_shifted(xb.data(), xb.size(), 0);
    Shifted x_shifted = upload_shifted(xb.data(), xb.size(), dt == DType::F32 ? 4 : 2);
    DeviceBuffer amax_d(8);
    auto amax_of = [&](const void* x) {
      cuda::GatherParams gp;
      gp.x = x;
      gp.x_dtype = dt;
      gp.K = K;
      gp.topk = 1;
      cuda::launch_gemm1_amax(gp, M, M, static_cast<float*>(amax_d.get()), nullptr);
      FMOE_CUDA(cudaDeviceSynchronize());
      return download<float>(amax_d, 1)[0];
    };
    const float vec = amax_of(x_aligned.ptr), elem = amax_of(x_shifted.ptr);
    EXPECT_EQ(vec, want);
    EXPECT_EQ(0, std::memcmp(&vec, &elem, 4)) << "vector " << vec << ", element-wise " << elem;
  }
}

// NVFP4 activations (W4A4): e2m1 x e4m3 values per 16-wide block, held in bf16.
class GatherNvfp4Paths : public ::testing::TestWithParam<std::tuple<DType, bool>> {};

TEST_P(GatherNvfp4Paths, VectorEqualsGeneral) {
  FMOE_REQUIRE_GPU();
  const auto [dt, on_input] = GetParam();
  gather_paths(dt, on_input, 2064, cuda::Fp8Quant::NVFP4, cuda::Operand::BF16, false);
}

INSTANTIATE_TEST_SUITE_P(Cases, GatherNvfp4Paths,
                         ::testing::Combine(::testing::Values(DType::BF16, DType::F32), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == DType::F32 ? "f32" : "bf16") +
                                  (std::get<1>(info.param) ? "_oninput" : "");
                         });

// ---------------------------------------------------------------- fp8-block GEMM2 operand

struct ActCase {
  Activation act;
  bool interleaved;
  GateUpOrder order;
  const char* name;
};
const ActCase kActCases[] = {
    {Activation::SILU, false, GateUpOrder::GATE_UP, "silu"},
    {Activation::SILU, false, GateUpOrder::UP_GATE, "silu_upgate"},
    {Activation::GELU, false, GateUpOrder::GATE_UP, "gelu"},
    {Activation::GELU_TANH, false, GateUpOrder::GATE_UP, "gelu_tanh"},
    {Activation::RELU2, false, GateUpOrder::GATE_UP, "relu2"},
    {Activation::SWIGLUOAI, true, GateUpOrder::GATE_UP, "swigluoai_interleaved"},
    {Activation::SWIGLUOAI, true, GateUpOrder::UP_GATE, "swigluoai_interleaved_upgate"},
    {Activation::SWIGLUOAI, false, GateUpOrder::GATE_UP, "swigluoai"},
};

// The GEMM2 operand of one quantisation mode (BLOCK or ROW), dequant kind and operand type from
// the vector and the general activation kernel.
// ko: as gather_paths'.
void activation_paths(const ActCase& c, cuda::Dequant::Kind dq, int64_t N, cuda::Fp8Quant quant, cuda::Operand op,
                      DType act_dtype = DType::BF16, int64_t M = 40, cuda::KOrder ko = cuda::KOrder::NATURAL) {
  const int64_t topk = 3;
  const int E = 5;
  const int64_t R = c.act == Activation::RELU2 ? N : 2 * N;
  std::mt19937 rng(static_cast<uint32_t>(static_cast<int>(c.act) * 31 + N + 7 * dq + c.interleaved));
  const auto ids = random_ids(M * topk, E, rng);
  DevicePlan plan(ids, E);
  const bool block = quant == cuda::Fp8Quant::BLOCK, nvfp4 = quant == cuda::Fp8Quant::NVFP4;
  const auto [code_bytes, scale_bytes] = row_bytes(quant, op, N);
  const int64_t slots = M * topk;
  DeviceBuffer in_scale_d = random_input_scales(E, rng);
  const auto h = mixed_values(slots * R, rng);
  std::vector<float> bias(E * R), a_row(slots), a_exp(E), w_exp(E), w_col(E * R);
  std::uniform_real_distribution<float> ud(0.5f, 2.0f);
  for (auto& v : bias) v = ud(rng) - 1.25f;
  for (auto* v : {&a_row, &a_exp, &w_exp, &w_col})
    for (auto& x : *v) x = ud(rng);
  Shifted h_aligned = upload_shifted(h.data(), h.size() * 4, 0);
  Shifted h_shifted = upload_shifted(h.data(), h.size() * 4, 4);
  DeviceBuffer tensor_scale_d = upload_vec(std::vector<float>{0.0173f});  // TENSOR_STATIC
  DeviceBuffer bias_d = upload_vec(bias), a_row_d = upload_vec(a_row), a_exp_d = upload_vec(a_exp),
               w_exp_d = upload_vec(w_exp), w_col_d = upload_vec(w_col);
  DeviceBuffer q_vec(slots * code_bytes), q_gen(slots * code_bytes), s_vec(slots * scale_bytes + 16),
      s_gen(slots * scale_bytes + 16), staging(slots * N * 4);
  // Codes poisoned differently, so a byte either kernel leaves unwritten differs; scales zeroed
  // (TENSOR_DYNAMIC writes only the amax, at the front).
  FMOE_CUDA(cudaMemset(q_vec.get(), 0xA5, slots * code_bytes));
  FMOE_CUDA(cudaMemset(q_gen.get(), 0x5A, slots * code_bytes));
  FMOE_CUDA(cudaMemset(s_vec.get(), 0, slots * scale_bytes + 16));
  FMOE_CUDA(cudaMemset(s_gen.get(), 0, slots * scale_bytes + 16));
  cuda::KOrder use_ko = ko;
  bool use_early = false;
  auto run = [&](const void* hp, DeviceBuffer& q, DeviceBuffer& s) {
    cuda::ActivationParams ap;
    ap.early = use_early;
    ap.korder = use_ko;
    ap.h = static_cast<const float*>(hp);
    ap.R = R;
    ap.N = N;
    ap.row_expert = plan.p.row_expert;
    ap.rows = plan.p.expert_offsets + E;
    ap.act = c.act;
    ap.order = c.order;
    ap.interleaved = c.interleaved;
    ap.bias = static_cast<const float*>(bias_d.get());
    ap.dq.kind = dq;
    if (dq == cuda::Dequant::GENERIC) {
      ap.dq.a_row = static_cast<const float*>(a_row_d.get());
      ap.dq.a_expert = static_cast<const float*>(a_exp_d.get());
      ap.dq.w_expert = static_cast<const float*>(w_exp_d.get());
    } else if (dq == cuda::Dequant::CHANNEL) {
      ap.dq.a_row = static_cast<const float*>(a_row_d.get());
      ap.dq.w = static_cast<const float*>(w_col_d.get());
    }
    ap.act_dtype = act_dtype;
    ap.out = q.get();
    ap.op = op;
    ap.quant = quant;
    if (block) {
      ap.block = {static_cast<float*>(s.get()), plan.p.row_expert, plan.p.expert_offsets, false};
    } else if (quant == cuda::Fp8Quant::TENSOR_STATIC) {
      ap.scale = {static_cast<const float*>(tensor_scale_d.get()), false};
    } else if (quant == cuda::Fp8Quant::TENSOR_DYNAMIC) {
      ap.amax_bits = static_cast<float*>(s.get());
      ap.staging = static_cast<float*>(staging.get());
    } else if (!nvfp4) {
      ap.row_scale = static_cast<float*>(s.get());
      ap.staging = static_cast<float*>(staging.get());  // the general kernel's
    }
    ap.nvfp4_input_scale = static_cast<const float*>(in_scale_d.get());
    cuda::launch_activation(ap, slots, nullptr);
  };
  expect_vector_equals_general(plan, E, code_bytes, scale_bytes, h_aligned.ptr, h_shifted.ptr, q_vec, q_gen, s_vec,
                               s_gen, run);
  if (quant == cuda::Fp8Quant::ROW || nvfp4) {  // the row kernels reading a row's expert / factor before the wait
    DeviceBuffer q_early(slots * code_bytes), s_early(slots * scale_bytes + 16);
    FMOE_CUDA(cudaMemset(q_early.get(), 0xA5, slots * code_bytes));  // q_vec's poison
    FMOE_CUDA(cudaMemset(s_early.get(), 0, slots * scale_bytes + 16));
    use_early = true;
    run(h_aligned.ptr, q_early, s_early);
    use_early = false;
    FMOE_CUDA(cudaDeviceSynchronize());
    expect_same_bytes(q_vec, q_early.get(), slots * code_bytes, "codes (early)");
    expect_same_bytes(s_vec, s_early.get(), slots * scale_bytes + 16, "scales (early)");
  }
  if (ko != cuda::KOrder::NATURAL) {
    DeviceBuffer q_plain(slots * code_bytes), s_plain(slots * scale_bytes + 16);
    use_ko = cuda::KOrder::NATURAL;
    run(h_shifted.ptr, q_plain, s_plain);
    FMOE_CUDA(cudaDeviceSynchronize());
    expect_korder_of(q_vec, q_plain, download<int32_t>(plan.offsets, E + 1)[E], N, ko);
  }
}

// Test name of an activation case: layout, variant, width.
std::string act_case_name(int ci, const char* variant, int64_t N) {
  return std::string(kActCases[ci].name) + variant + "_N" + std::to_string(N);
}

class ActivationBlockPaths : public ::testing::TestWithParam<std::tuple<int, bool, int64_t>> {};

TEST_P(ActivationBlockPaths, VectorEqualsGeneral) {
  FMOE_REQUIRE_GPU();
  const auto [ci, generic_dq, N] = GetParam();
  activation_paths(kActCases[ci], generic_dq ? cuda::Dequant::GENERIC : cuda::Dequant::NONE, N,
                   cuda::Fp8Quant::BLOCK, cuda::Operand::FP8);
}

INSTANTIATE_TEST_SUITE_P(Cases, ActivationBlockPaths,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(std::size(kActCases))), ::testing::Bool(),
                                            ::testing::Values(int64_t{256}, int64_t{384}, int64_t{2176}, int64_t{14336})),
                         [](const auto& info) {
                           return act_case_name(std::get<0>(info.param), std::get<1>(info.param) ? "_generic_dq" : "",
                                                std::get<2>(info.param));
                         });

// Per-token fp8 (ROW) as the formats use it: per-channel dequant into fp8 codes (fp8-channel),
// generic dequant into bf16-held codes (mxfp4-fp8). N = 14336 (Mixtral) stages 56 KB per row
// in shared memory (the opt-in path).
class ActivationRowPaths : public ::testing::TestWithParam<std::tuple<int, bool, int64_t>> {};

TEST_P(ActivationRowPaths, VectorEqualsGeneral) {
  FMOE_REQUIRE_GPU();
  const auto [ci, channel, N] = GetParam();
  activation_paths(kActCases[ci], channel ? cuda::Dequant::CHANNEL : cuda::Dequant::GENERIC, N, cuda::Fp8Quant::ROW,
                   channel ? cuda::Operand::FP8 : cuda::Operand::BF16);
}

INSTANTIATE_TEST_SUITE_P(Cases, ActivationRowPaths,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(std::size(kActCases))), ::testing::Bool(),
                                            ::testing::Values(int64_t{392}, int64_t{14336})),
                         [](const auto& info) {
                           return act_case_name(std::get<0>(info.param),
                                                std::get<1>(info.param) ? "_channel_fp8" : "_generic_bf16",
                                                std::get<2>(info.param));
                         });

// ROW at decode sizes (8 tokens x top-3 = 24 rows): the lanes kernel (one output per thread, a row on a cluster of
// 1 / 3 / 7 blocks), fp8 codes, and bf16-held codes in the 4-bit mma kernel's k order (widths multiples of 64, as
// expect_korder_of needs).
class ActivationRowLanes : public ::testing::TestWithParam<std::tuple<int, bool, int64_t>> {};

TEST_P(ActivationRowLanes, VectorEqualsGeneral) {
  FMOE_REQUIRE_GPU();
  const auto [ci, channel, N] = GetParam();
  activation_paths(kActCases[ci], channel ? cuda::Dequant::CHANNEL : cuda::Dequant::GENERIC, N, cuda::Fp8Quant::ROW,
                   channel ? cuda::Operand::FP8 : cuda::Operand::BF16, DType::BF16, 8,
                   channel ? cuda::KOrder::NATURAL : cuda::KOrder::W4_MMA);
}

INSTANTIATE_TEST_SUITE_P(Cases, ActivationRowLanes,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(std::size(kActCases))), ::testing::Bool(),
                                            ::testing::Values(int64_t{448}, int64_t{2880}, int64_t{7168})),
                         [](const auto& info) {
                           return act_case_name(std::get<0>(info.param),
                                                std::get<1>(info.param) ? "_channel_fp8" : "_generic_bf16_w4mma",
                                                std::get<2>(info.param));
                         });

// Dynamic per-tensor fp8 (TENSOR_DYNAMIC: vLLM's online fp8): the staged vector kernel and the
// general one give the same amax (compared as the first scale bytes) and codes, for every
// activation layout, no / per-channel dequant, bf16 and fp32 activation dtypes.
class ActivationDynamicPaths : public ::testing::TestWithParam<std::tuple<int, bool, DType>> {};

TEST_P(ActivationDynamicPaths, VectorEqualsGeneral) {
  FMOE_REQUIRE_GPU();
  const auto [ci, channel, dt] = GetParam();
  activation_paths(kActCases[ci], channel ? cuda::Dequant::CHANNEL : cuda::Dequant::NONE, 2056,
                   cuda::Fp8Quant::TENSOR_DYNAMIC, cuda::Operand::FP8, dt);
}

INSTANTIATE_TEST_SUITE_P(Cases, ActivationDynamicPaths,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(std::size(kActCases))), ::testing::Bool(),
                                            ::testing::Values(DType::BF16, DType::F32)),
                         [](const auto& info) {
                           return act_case_name(std::get<0>(info.param), std::get<1>(info.param) ? "_channel" : "",
                                                2056) +
                                  (std::get<2>(info.param) == DType::F32 ? "_f32" : "_bf16");
                         });

// Conversion (NONE to bf16 / fp16) and static per-tensor fp8 of the gated layouts, halves apart or
// interleaved (activation_vec_kernel), against the general kernel; mode 3: bf16 with the 4-bit
// formats' GENERIC per-row dequant (MXFP4 / NVFP4 GEMM1 output, e.g. gpt-oss interleaved).
class ActivationTensorPaths : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ActivationTensorPaths, VectorEqualsGeneral) {
  FMOE_REQUIRE_GPU();
  const auto [ci, mode] = GetParam();
  activation_paths(kActCases[ci], mode == 3 ? cuda::Dequant::GENERIC : cuda::Dequant::NONE, 2056,
                   mode == 2 ? cuda::Fp8Quant::TENSOR_STATIC : cuda::Fp8Quant::NONE,
                   mode == 0 || mode == 3 ? cuda::Operand::BF16 : mode == 1 ? cuda::Operand::FP16 : cuda::Operand::FP8);
}

// kActCases 0-3 and 5-7: silu (both orders), gelu, gelu_tanh, swigluoai interleaved (both orders)
// and halves.
INSTANTIATE_TEST_SUITE_P(Cases, ActivationTensorPaths,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3, 5, 6, 7), ::testing::Range(0, 4)),
                         [](const auto& info) {
                           const int mode = std::get<1>(info.param);
                           return act_case_name(std::get<0>(info.param), "", 2056) +
                                  (mode == 0 ? "_bf16" : mode == 1 ? "_fp16" : mode == 2 ? "_fp8_static" : "_bf16_generic");
                         });

// Many rows (700 tokens x top-3 = 2100 rows of N = 2056): whole rows per block instead of the
// column chunks the parametrised cases (120 rows) get.
TEST(ActivationDynamicRows, VectorEqualsGeneral) {
  FMOE_REQUIRE_GPU();
  activation_paths(kActCases[0], cuda::Dequant::NONE, 2056, cuda::Fp8Quant::TENSOR_DYNAMIC, cuda::Operand::FP8,
                   DType::BF16, 700);
}

// The ROW kernels stage the row's outputs in the activation dtype (16 bits for bf16 / fp16, exact
// since they are rounded to it): every dtype; N = 14336 with 40 tokens x top-3 rows runs the
// cluster kernel, with 200 tokens (too many rows for clusters) the row kernel with 28 / 56 KB.
class ActivationRowStaging : public ::testing::TestWithParam<std::tuple<DType, int64_t, int64_t>> {};

TEST_P(ActivationRowStaging, VectorEqualsGeneral) {
  FMOE_REQUIRE_GPU();
  const auto [dt, N, M] = GetParam();
  activation_paths(kActCases[0], cuda::Dequant::CHANNEL, N, cuda::Fp8Quant::ROW, cuda::Operand::FP8, dt, M);
}

INSTANTIATE_TEST_SUITE_P(Cases, ActivationRowStaging,
                         ::testing::Combine(::testing::Values(DType::BF16, DType::F16, DType::F32),
                                            ::testing::Values(int64_t{392}, int64_t{14336}),
                                            ::testing::Values(int64_t{40}, int64_t{200})),
                         [](const auto& info) {
                           const DType d = std::get<0>(info.param);
                           return std::string(d == DType::BF16 ? "bf16" : d == DType::F16 ? "f16" : "f32") + "_N" +
                                  std::to_string(std::get<1>(info.param)) + "_M" +
                                  std::to_string(std::get<2>(info.param));
                         });

// NVFP4 activations (W4A4) with the generic dequant of the 4-bit formats: M = 40 (120 slots) takes the lanes kernel
// (a 16-wide block on 16 lanes), M = 200 (600 slots, over kNvfp4LanesMaxRows) the vector kernel (a block per thread).
class ActivationNvfp4Paths : public ::testing::TestWithParam<std::tuple<int, int64_t, int64_t>> {};

TEST_P(ActivationNvfp4Paths, VectorEqualsGeneral) {
  FMOE_REQUIRE_GPU();
  const auto [ci, N, M] = GetParam();
  activation_paths(kActCases[ci], cuda::Dequant::GENERIC, N, cuda::Fp8Quant::NVFP4, cuda::Operand::BF16, DType::BF16, M);
}

INSTANTIATE_TEST_SUITE_P(Cases, ActivationNvfp4Paths,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(std::size(kActCases))),
                                            ::testing::Values(int64_t{400}, int64_t{2880}),
                                            ::testing::Values(int64_t{40}, int64_t{200})),
                         [](const auto& info) {
                           return act_case_name(std::get<0>(info.param), std::get<2>(info.param) == 40 ? "_lanes" : "_vec",
                                                std::get<1>(info.param));
                         });

// ---------------------------------------------------------------- the 4-bit wgmma operand order

// Every writer of the 4-bit kernels' bf16 operands in their k orders (w4_kperm.cuh: the wgmma
// kernel's and the mma kernel's): the gathers (conversion: row walk and token-major; per-token fp8
// values; nvfp4 values: row and token-major; with the router weight on the input the general row
// walks) and the activation kernels (vector conversion, relu2's general kernel, per-token fp8
// values, nvfp4 values), vector and general kernels alike, against the general kernel's plain
// operand. Widths a multiple of 64.
class W4KorderWriters : public ::testing::TestWithParam<cuda::KOrder> {};

TEST_P(W4KorderWriters, GathersStoreThePermutedOperand) {
  FMOE_REQUIRE_GPU();
  const cuda::KOrder ko = GetParam();
  for (bool on_input : {false, true}) {
    SCOPED_TRACE(on_input ? "router weight on input" : "plain");
    gather_paths(DType::BF16, on_input, 2048, cuda::Fp8Quant::NONE, cuda::Operand::BF16, false, 80, false, false, ko);
    gather_paths(DType::BF16, on_input, 2048, cuda::Fp8Quant::NONE, cuda::Operand::BF16, false,
                 cuda::kTokenGatherMinTokens, !on_input, false, ko);
    gather_paths(DType::F32, on_input, 2880, cuda::Fp8Quant::ROW, cuda::Operand::BF16, false, 50, false, false, ko);
    gather_paths(DType::BF16, on_input, 2880, cuda::Fp8Quant::ROW, cuda::Operand::FP16, false,
                 cuda::kTokenGatherMinTokens, !on_input, false, ko);
    gather_paths(DType::BF16, on_input, 2048, cuda::Fp8Quant::NVFP4, cuda::Operand::BF16, false, 50, false, false, ko);
    gather_paths(DType::BF16, on_input, 2048, cuda::Fp8Quant::NVFP4, cuda::Operand::BF16, false,
                 cuda::kTokenGatherMinTokens, !on_input, true, ko);
    // K = 2880: 180 16-blocks on 192 threads, the last warp's quad exchange with 20 live lanes.
    gather_paths(DType::BF16, on_input, 2880, cuda::Fp8Quant::NVFP4, cuda::Operand::BF16, false,
                 cuda::kTokenGatherMinTokens, !on_input, false, ko);
  }
}

TEST_P(W4KorderWriters, ActivationsStoreThePermutedOperand) {
  FMOE_REQUIRE_GPU();
  const cuda::KOrder ko = GetParam();
  for (int ci : {0, 4, 6}) {  // silu halves, relu2 (general kernel), swigluoai interleaved up-gate
    SCOPED_TRACE(kActCases[ci].name);
    activation_paths(kActCases[ci], cuda::Dequant::GENERIC, 2048, cuda::Fp8Quant::NONE, cuda::Operand::BF16,
                     DType::BF16, 40, ko);
    activation_paths(kActCases[ci], cuda::Dequant::GENERIC, 2880, cuda::Fp8Quant::ROW, cuda::Operand::BF16,
                     DType::BF16, 40, ko);
    activation_paths(kActCases[ci], cuda::Dequant::GENERIC, 768, cuda::Fp8Quant::NVFP4, cuda::Operand::BF16,
                     DType::BF16, 40, ko);
  }
}

INSTANTIATE_TEST_SUITE_P(Orders, W4KorderWriters, ::testing::Values(cuda::KOrder::W4_WGMMA, cuda::KOrder::W4_MMA),
                         [](const auto& info) { return info.param == cuda::KOrder::W4_WGMMA ? "wgmma" : "mma"; });

// ---------------------------------------------------------------- finalize

// y in fp32 (4 columns a thread) or bf16 (8 columns, the large-M GEMM2 output of bf16 layers):
// the vector kernel against the general one (misaligned y), and for bf16 y also against the fp32
// vector kernel fed the same bf16-exact values (the two y dtypes sum the same numbers).
class FinalizePaths : public ::testing::TestWithParam<std::tuple<int, int, bool>> {};

TEST_P(FinalizePaths, VectorEqualsGeneral) {
  FMOE_REQUIRE_GPU();
  struct Shape {
    int64_t M, topk, K;
  };
  const Shape shapes[] = {{1, 8, 7168}, {3, 10, 512}, {700, 8, 2048}};
  const auto [kind, si, y_bf16] = GetParam();
  const Shape sh = shapes[si];
  const int E = 9;
  std::mt19937 rng(static_cast<uint32_t>(kind * 13 + si));
  const auto ids = random_ids(sh.M * sh.topk, E, rng);
  DevicePlan plan(ids, E);
  const int64_t slots = sh.M * sh.topk;
  auto y = mixed_values(slots * sh.K, rng);
  std::vector<uint16_t> y16(y.size());
  if (y_bf16) {
    for (size_t i = 0; i < y.size(); ++i) {
      y16[i] = float_to_bf16_bits(y[i]);
      y[i] = bf16_bits_to_float(y16[i]);
    }
  }
  std::uniform_real_distribution<float> ud(0.5f, 2.0f);
  std::vector<float> tw(slots), bias(E * sh.K), a_row(slots), w_e(E), w_ec(E * sh.K), a_exp(E), a_t{ud(rng)};
  for (auto* v : {&tw, &bias, &a_row, &w_e, &w_ec, &a_exp})
    for (auto& x : *v) x = ud(rng);
  Shifted y_aligned = upload_shifted(y.data(), y.size() * 4, 0);
  Shifted y_shifted = upload_shifted(y.data(), y.size() * 4, 4);
  Shifted y16_aligned = upload_shifted(y16.data(), y16.size() * 2, 0);
  Shifted y16_shifted = upload_shifted(y16.data(), y16.size() * 2, 2);
  DeviceBuffer tw_d = upload_vec(tw), bias_d = upload_vec(bias), a_row_d = upload_vec(a_row), w_e_d = upload_vec(w_e),
               w_ec_d = upload_vec(w_ec), a_exp_d = upload_vec(a_exp), a_t_d = upload_vec(a_t);
  DeviceBuffer out_vec(sh.M * sh.K * 2), out_gen(sh.M * sh.K * 2), out_vec16(sh.M * sh.K * 2);
  auto run = [&](const void* yp, DType y_dtype, DeviceBuffer& out, bool early = false, const void* y2 = nullptr) {
    cuda::FinalizeParams fp;
    fp.early = early;  // the slots read before the wait (what the 4-bit layers' finalize does)
    fp.y = yp;
    fp.y2 = static_cast<const float*>(y2);
    fp.y_dtype = y_dtype;
    fp.M = sh.M;
    fp.K = sh.K;
    fp.topk = sh.topk;
    fp.slot_row = plan.p.slot_row;
    fp.row_expert = plan.p.row_expert;
    fp.topk_weights = static_cast<const float*>(tw_d.get());
    fp.bias = kind == 0 ? nullptr : static_cast<const float*>(bias_d.get());
    fp.dq.kind = static_cast<cuda::Dequant::Kind>(kind);
    if (kind == cuda::Dequant::TENSOR) {
      fp.dq.a_tensor = {static_cast<const float*>(a_t_d.get()), false};
      fp.dq.w = static_cast<const float*>(w_e_d.get());
    } else if (kind == cuda::Dequant::CHANNEL) {
      fp.dq.a_row = static_cast<const float*>(a_row_d.get());
      fp.dq.w = static_cast<const float*>(w_ec_d.get());
    } else if (kind == cuda::Dequant::GENERIC) {
      fp.dq.a_row = static_cast<const float*>(a_row_d.get());
      fp.dq.a_expert = static_cast<const float*>(a_exp_d.get());
      fp.dq.w_expert = static_cast<const float*>(w_e_d.get());
    }
    fp.out = out.get();
    fp.out_dtype = DType::BF16;
    cuda::launch_finalize(fp, nullptr);
  };
  run(y_aligned.ptr, DType::F32, out_vec);
  if (!y_bf16) {
    run(y_shifted.ptr, DType::F32, out_gen);
    DeviceBuffer out_early(sh.M * sh.K * 2);
    run(y_aligned.ptr, DType::F32, out_early, true);
    FMOE_CUDA(cudaDeviceSynchronize());
    expect_same_bytes(out_vec, out_gen.get(), sh.M * sh.K * 2, "output");
    expect_same_bytes(out_vec, out_early.get(), sh.M * sh.K * 2, "output (slots read before the wait)");
    // GEMM2's k split in two (FinalizeParams::y2, the 4-bit mma kernel at one token): y + y2 added once in fp32. The
    // vector (y2 instance) and the general kernel on the two halves against the vector kernel on their sum (host fp32).
    const auto y_b = mixed_values(slots * sh.K, rng);
    std::vector<float> ysum(y.size());
    for (size_t i = 0; i < y.size(); ++i) ysum[i] = y[i] + y_b[i];
    Shifted ysum_d = upload_shifted(ysum.data(), ysum.size() * 4, 0), yb_d = upload_shifted(y_b.data(), y_b.size() * 4, 0);
    DeviceBuffer out_sum(sh.M * sh.K * 2), out_split(sh.M * sh.K * 2), out_split_gen(sh.M * sh.K * 2);
    run(ysum_d.ptr, DType::F32, out_sum);
    run(y_aligned.ptr, DType::F32, out_split, true, yb_d.ptr);
    run(y_shifted.ptr, DType::F32, out_split_gen, false, yb_d.ptr);
    FMOE_CUDA(cudaDeviceSynchronize());
    expect_same_bytes(out_sum, out_split.get(), sh.M * sh.K * 2, "output (y + y2, vector)");
    expect_same_bytes(out_sum, out_split_gen.get(), sh.M * sh.K * 2, "output (y + y2, general)");
    return;
  }
  run(y16_aligned.ptr, DType::BF16, out_vec16);
  run(y16_shifted.ptr, DType::BF16, out_gen);
  FMOE_CUDA(cudaDeviceSynchronize());
  expect_same_bytes(out_vec16, out_gen.get(), sh.M * sh.K * 2, "output (bf16 y: vector vs general)");
  expect_same_bytes(out_vec16, out_vec.get(), sh.M * sh.K * 2, "output (bf16 y vs the same values as fp32 y)");
}

const char* const kDequantNames[] = {"none", "tensor", "channel", "generic"};
const char* const kShapeNames[] = {"M1_top8_K7168", "M3_top10_K512", "M700_top8_K2048"};
INSTANTIATE_TEST_SUITE_P(Cases, FinalizePaths,
                         ::testing::Combine(::testing::Range(0, 4), ::testing::Range(0, 3), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(kDequantNames[std::get<0>(info.param)]) + "_" +
                                  kShapeNames[std::get<1>(info.param)] + (std::get<2>(info.param) ? "_ybf16" : "");
                         });

}  // namespace
}  // namespace fusedmoe::gputest
