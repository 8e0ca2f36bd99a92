// GEMM1 + activation for the fp8-block format at large batches: CUTLASS's ptr-array
// blockwise-scaled mainloop (1 x 128 activation scales, weight block scales, promoted per 128-wide
// K tile) with the gated activation in the epilogue (sm90_gated_act_epilogue.cuh), writing the
// activation output rounded to bf16. GEMM1's fp32 output is neither written nor read back; what
// is left of the activation stage is the 1 x 128 quantisation of those bf16 rows
// (launch_activation with ActivationParams::act_bf16). Values: the activation kernel's, from the
// same kind of promoted sums (the promotion multiplies a tile's partial sums by the row's
// activation scale, then by the weight scale, where the unfused 128 x 128 instance multiplies by
// their product: the sums may differ in the last bit).
//
// Why not the quantisation in the epilogue as well: a 1 x 128 group of the activation output
// needs 256 GEMM1 columns (gate and up), and the blockwise mainloop keeps two sets of fp32
// accumulators (the promoted sums and the tile's partial sums), so a 128 x 256 tile does not fit
// in the registers; a 128-column tile holds half a group.
//
// Tile 128 x 128 x 128, clusters of two CTAs along N sharing the activation tile (TMA multicast,
// sm90_blockwise::kClusterN). Taken for gate / up halves at most 32 MB apart (measurements in
// sm90_gemm1_block_act_applies, grouped_gemm.cpp). Halves layouts read 64 rows of each half per tile (PairedHalvesMainloop),
// whose two weight scale blocks differ (gate rows and up rows are I rows apart), so the instance
// takes weight scales per 64 GEMM1 columns in tile order ([E, 2I / 64, K / 128], written per call
// from the stored [E, 2I / 128, K / 128] by the setup kernel): granule c of a tile-ordered row is
// weight row (c % 2) * I + 64 * (c / 2) for halves, 64 c for interleaved rows.
#include <cuda_runtime.h>

#include "cuda/chained_launch.cuh"
#include "cuda/sm90_blockwise_gemm.cuh"
#include "cuda/sm90_gated_act_epilogue.cuh"
#include "cutlass/detail/blockwise_scale_layout.hpp"

namespace fusedmoe::cuda {
namespace {
using namespace cute;

constexpr int kBlock = 128;       // K tile = one scale block
constexpr int kScaleGranN = 64;   // weight scales per 64 GEMM1 columns (half a tile)
using sm90_blockwise::kClusterN;  // clusters of two CTAs along N share the activation tile

// The builder's collective with another TiledMma (same stages, copies and smem layouts).
template <class Op, class NewTiledMma>
struct WithTiledMma;
template <class DP, class TS, class EA, class SA, class EB, class SB, class TM, class GA, class LA, class CA, class TA,
          class GB, class LB, class CB, class TB, class NewTiledMma>
struct WithTiledMma<cutlass::gemm::collective::CollectiveMma<DP, TS, EA, SA, EB, SB, TM, GA, LA, CA, TA, GB, LB, CB, TB>,
                    NewTiledMma> {
  using type = cutlass::gemm::collective::CollectiveMma<DP, TS, EA, SA, EB, SB, NewTiledMma, GA, LA, CA, TA, GB, LB, CB, TB>;
};

struct BlockActGemm {
  using Element = cutlass::float_e4m3_t;
  using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;
  using Shape3 = typename ProblemShape::UnderlyingProblemShape;
  using TileShape = Shape<_128, _128, _128>;
  using ScaleConfig =
      cutlass::detail::Sm90BlockwiseScaleConfig<1, kScaleGranN, kBlock, GMMA::Major::MN, GMMA::Major::K>;
  using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
  using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());
  using CollectiveEpilogue =
      cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<sm90::GatedActEpilogue<false>>;
  // B as K-major rows with a dynamic l stride: a 3-D descriptor PairedHalvesMainloop re-dimensions.
  using StrideBTag = Stride<int64_t, Int<1>, int64_t>*;
  using BuiltMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cute::tuple<cutlass::layout::RowMajor*, LayoutSFA*>,
      16, Element, cute::tuple<StrideBTag, LayoutSFB*>, 16, float, TileShape, Shape<_1, Int<kClusterN>, _1>,
      cutlass::gemm::collective::StageCountAutoCarveout<0>,
      cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise>::CollectiveOp;
  // Two 64-column wgmma atoms per warpgroup along N instead of the builder's one of 128: with two
  // weight scales per tile the collective multiplies the partial sums by per-value scale
  // fragments, whose layout must have the accumulators' shape; with the 128-wide atom the N mode
  // of a thread's values comes out split (8, 2) at the scale granule and CUTLASS 4.2's promotion
  // does not compile. A 64-wide atom ends at the granule.
  using TiledMma = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, float, Shape<_128, _64, _128>, GMMA::Major::K, GMMA::Major::K>(),
      Layout<Shape<_2, _1, _1>>{}));
  using CollectiveMainloop = sm90::PairedHalvesMainloop<typename WithTiledMma<BuiltMainloop, TiledMma>::type>;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;

  struct Arrays {
    Shape3* problems;
    const Element** ptr_a;
    const Element** ptr_b;
    const float** ptr_sfa;
    const float** ptr_sfb;
    StrideA* stride_a;
    StrideB* stride_b;
    void* cutlass_workspace;
  };
  static Arrays carve(void* base, int groups, size_t* total) {
    WorkspaceCarve w(base);
    const size_t g = static_cast<size_t>(groups);
    Arrays a;
    a.problems = w.take<Shape3>(g);
    a.ptr_a = w.take<const Element*>(g);
    a.ptr_b = w.take<const Element*>(g);
    a.ptr_sfa = w.take<const float*>(g);
    a.ptr_sfb = w.take<const float*>(g);
    a.stride_a = w.take<StrideA>(g);
    a.stride_b = w.take<StrideB>(g);
    a.cutlass_workspace = w.next();
    *total = w.used();
    return a;
  }
  static typename Gemm::Arguments arguments(const Arrays& arr, int groups, int device, int sm_count,
                                            const ActivationParams& act, const int32_t* offsets) {
    cutlass::KernelHardwareInfo hw;
    hw.device_id = device;
    hw.sm_count = sm_count;
    typename Gemm::Arguments args;
    args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
    args.problem_shape = {groups, arr.problems, nullptr};
    // The collective derives each group's scale layouts from its problem shape.
    args.mainloop = {arr.ptr_a, arr.stride_a, arr.ptr_b, arr.stride_b, arr.ptr_sfa, nullptr, arr.ptr_sfb, nullptr};
    args.epilogue.act = act;
    args.epilogue.offsets = offsets;
    args.hw_info = hw;
    return args;
  }
};

// One block per group: the group's problem, pointers and strides (thread 0), and its weight
// scales in tile order (all threads).
__global__ void setup_block_act_kernel(int groups, const int32_t* offsets, int n, int k, bool halves,
                                       const uint8_t* a, const uint8_t* b, const float* a_scale, const float* b_scale,
                                       float* b_scale_tiles, BlockActGemm::Shape3* problems, const void** ptr_a,
                                       const void** ptr_b, const float** ptr_sfa, const float** ptr_sfb,
                                       BlockActGemm::StrideA* stride_a, BlockActGemm::StrideB* stride_b) {
  chain_wait();
  const int g = blockIdx.x;
  if (g >= groups) return;
  const int kb = k / kBlock, nb = n / kBlock, granules = n / kScaleGranN, half = n / 2;
  const float* src = b_scale + static_cast<int64_t>(g) * nb * kb;
  float* dst = b_scale_tiles + static_cast<int64_t>(g) * granules * kb;
  for (int i = threadIdx.x; i < granules * kb; i += blockDim.x) {
    const int c = i / kb, j = i - c * kb;
    const int row = halves ? (c & 1) * half + kScaleGranN * (c >> 1) : kScaleGranN * c;
    dst[i] = src[(row / kBlock) * kb + j];
  }
  if (threadIdx.x != 0) return;
  const int64_t row0 = offsets[g];
  const int rows = offsets[g + 1] - offsets[g];
  problems[g] = BlockActGemm::Shape3{rows, n, k};
  ptr_a[g] = a + row0 * k;
  ptr_b[g] = b + static_cast<int64_t>(g) * n * k;
  ptr_sfa[g] = a_scale + row0 * kb;
  ptr_sfb[g] = dst;
  stride_a[g] = cutlass::make_cute_packed_stride(BlockActGemm::StrideA{}, {rows, k, 1});
  BlockActGemm::StrideB sb{};
  if (halves) {  // PairedHalvesMainloop: row stride k / 2 (element stride 2), l = the second half
    get<0>(sb) = k / 2;
    get<2>(sb) = static_cast<int64_t>(half) * k;
  } else {
    get<0>(sb) = k;
    get<2>(sb) = static_cast<int64_t>(n) * k;  // l extent 1: never stepped
  }
  stride_b[g] = sb;
}

}  // namespace

size_t sm90_grouped_gemm_fp8_blockwise_act_workspace(int groups, int sm_count) {
  size_t arrays = 0;
  const BlockActGemm::Arrays arr = BlockActGemm::carve(nullptr, groups, &arrays);
  const auto args = BlockActGemm::arguments(arr, groups, 0, sm_count, ActivationParams{}, nullptr);
  return arrays + WorkspaceCarve::align(BlockActGemm::Gemm::get_workspace_size(args));
}

void sm90_grouped_gemm_fp8_blockwise_act(const GroupedGemmArgs& g, const ActivationParams& act, cudaStream_t stream) {
  size_t arrays_bytes = 0;
  const BlockActGemm::Arrays arr = BlockActGemm::carve(g.workspace, g.groups, &arrays_bytes);
  launch_chained(setup_block_act_kernel, static_cast<unsigned>(g.groups), 256, 0, stream, g.groups, g.expert_offsets,
                 static_cast<int>(g.n), static_cast<int>(g.k), !act.interleaved, static_cast<const uint8_t*>(g.a),
                 static_cast<const uint8_t*>(g.b), g.a_scale, g.b_scale, g.b_scale_tiles, arr.problems,
                 reinterpret_cast<const void**>(arr.ptr_a), reinterpret_cast<const void**>(arr.ptr_b), arr.ptr_sfa,
                 arr.ptr_sfb, arr.stride_a, arr.stride_b);
  const auto args = BlockActGemm::arguments(arr, g.groups, g.device, g.sm_count, act, g.expert_offsets);
  BlockActGemm::Gemm gemm;
  sm90::check_cutlass(gemm.can_implement(args), "can_implement (fp8-block GEMM1 + activation)");
  sm90::check_cutlass(gemm.initialize(args, arr.cutlass_workspace, stream), "initialize (fp8-block GEMM1 + activation)");
  sm90::check_cutlass(gemm.run(stream), "run (fp8-block GEMM1 + activation)");
}

}  // namespace fusedmoe::cuda
