#pragma once
// The CUTLASS ptr-array grouped GEMM with fp8 operands and fp32 scales promoted per 128-wide K
// block inside the mainloop ("FP8 blockwise" collective):
//   acc += dot(a[m, kb*128 .. +128], w[n, kb*128 .. +128]) * a_scale[m, kb] * w_scale[n / WeightGran, kb]
// D is the scaled result, fp32 or bf16 (ElementD_: the fp8-block layers' GEMM2 output y, as
// sm90_bf16_d_applies in grouped_gemm.hpp). Its user: sm90_grouped_gemm_fp8_blockwise.cu (and _d16),
// fp8-block (DeepSeek-V3) with weight scales per 128 x 128 block (WeightGran = 128). (WeightGran = 1,
// scales per row and 128-wide K group, served W4A8's large batches until 2026-11-22, when its own
// wgmma kernel, w4a8_wgmma.cu, replaced that way.)
//
// Scale layouts (per group g, rows_g rows of activations starting at row0, see grouped_gemm.hpp):
//   activations 1 x 128 along K: column-major [KB, rows_g] at a_scale + row0 * KB (CUTLASS's
//     MN-major SFA/SFB layout for a per-group extent of rows_g);
//   weights WeightGran x 128: the stored [n / WeightGran, KB] row-major scales of expert g (K-major).
// CUTLASS rebuilds each group's scale layout from its problem shape, so only the per-group base
// pointers are written (by setup_blockwise_kernel, on the device, from the expert offsets).
// The collective needs n and k to be multiples of 128 (whole scale blocks per tile along N for
// 128-row weight blocks; a K tile is one scale block); callers refuse other shapes up front.
#include "cuda/chained_launch.cuh"
#include "cuda/sm90_grouped_gemm.cuh"
#include "cutlass/detail/blockwise_scale_layout.hpp"

namespace fusedmoe::cuda::sm90_blockwise {
using namespace cute;

constexpr int kBlock = 128;
// The large-M instances run clusters of two CTAs along N that share the activation tile by TMA
// multicast: the 128-column tiles re-read it from L2 once per N tile otherwise (L2 reads 1.5x the
// 128 x 256 fp8-tensor GEMMs', bench/results/2026-11-26-h100-fp8-block-gemm1-ncu). H100, same
// binary A/B (bench/results/2026-11-26-h100-fp8-block-cluster-n2): DeepSeek-V3 TP1 at 4096 tokens
// GEMM1 -3.5%, GEMM2 -2.7%, layer 0.963; Mixtral 1024 GEMM2 -13%, layer 0.957; Qwen3 0.99.
constexpr int kClusterN = 2;

// ClusterN: CTAs of a cluster along N, which share the activation tile by TMA multicast (the
// 128-column tiles otherwise re-read it from L2 once per N tile).
template <class TileShape, int WeightGran = kBlock, class ElementD_ = float, int ClusterN = 1>
struct BlockwiseGemm {
  using Element = cutlass::float_e4m3_t;
  using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
  using Shape3 = typename ProblemShape::UnderlyingProblemShape;
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::ColumnMajor;
  using LayoutD = cutlass::layout::RowMajor;
  using ElementD = ElementD_;
  static constexpr DType kDType = cute::is_same_v<ElementD, float> ? DType::F32 : DType::BF16;
  static_assert(cute::is_same_v<ElementD, float> || cute::is_same_v<ElementD, cutlass::bfloat16_t>);
  static constexpr int kAlignAB = 16;
  static constexpr int kAlignD = 128 / cutlass::sizeof_bits<ElementD>::value;  // 16-byte rows
  using ClusterShape = Shape<_1, Int<ClusterN>, _1>;

  // Activations: one scale per row (granularity 1, MN-major); weights: WeightGran rows (K-major).
  static_assert(WeightGran == kBlock || WeightGran == 1, "weight scales per 128 rows or per row");
  using ScaleConfig = cutlass::detail::Sm90BlockwiseScaleConfig<1, WeightGran, kBlock, cute::GMMA::Major::MN,
                                                                 cute::GMMA::Major::K>;
  using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
  using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD*, kAlignD, ElementD, LayoutD*,
      kAlignD, cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
      cutlass::epilogue::fusion::LinearCombination<ElementD, float>>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cute::tuple<LayoutA*, LayoutSFA*>, kAlignAB,
      Element, cute::tuple<LayoutB*, LayoutSFB*>, kAlignAB, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;

  struct Arrays {
    Shape3* problems;
    const Element** ptr_a;
    const Element** ptr_b;
    ElementD** ptr_d;
    const float** ptr_sfa;
    const float** ptr_sfb;
    StrideA* stride_a;
    StrideB* stride_b;
    StrideD* stride_d;
    void* cutlass_workspace;
  };

  static Arrays carve(void* base, int groups, size_t* total) {
    WorkspaceCarve w(base);
    const size_t g = static_cast<size_t>(groups);
    Arrays a;
    a.problems = w.take<Shape3>(g);
    a.ptr_a = w.take<const Element*>(g);
    a.ptr_b = w.take<const Element*>(g);
    a.ptr_d = w.take<ElementD*>(g);
    a.ptr_sfa = w.take<const float*>(g);
    a.ptr_sfb = w.take<const float*>(g);
    a.stride_a = w.take<StrideA>(g);
    a.stride_b = w.take<StrideB>(g);
    a.stride_d = w.take<StrideD>(g);
    a.cutlass_workspace = w.next();
    *total = w.used();
    return a;
  }

  static typename Gemm::Arguments arguments(const Arrays& arr, int groups, int device, int sm_count) {
    cutlass::KernelHardwareInfo hw;
    hw.device_id = device;
    hw.sm_count = sm_count;
    typename Gemm::Arguments args;
    args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
    args.problem_shape = {groups, arr.problems, nullptr};  // shapes live on the device only
    // The per-group scale layouts are derived from the problem shapes by the collective.
    args.mainloop = {arr.ptr_a, arr.stride_a, arr.ptr_b, arr.stride_b, arr.ptr_sfa, nullptr, arr.ptr_sfb, nullptr};
    args.epilogue.ptr_C = nullptr;
    args.epilogue.dC = arr.stride_d;
    args.epilogue.ptr_D = arr.ptr_d;
    args.epilogue.dD = arr.stride_d;
    auto& f = args.epilogue.thread;
    f.alpha = 1.0f;
    f.beta = 0.0f;
    f.alpha_ptr = nullptr;
    f.beta_ptr = nullptr;
    f.alpha_ptr_array = nullptr;
    f.beta_ptr_array = nullptr;
    f.dAlpha = {cute::_0{}, cute::_0{}, 0};
    f.dBeta = {cute::_0{}, cute::_0{}, 0};
    args.hw_info = hw;
    return args;
  }

  static size_t workspace_bytes(int groups, int sm_count) {
    size_t arrays = 0;
    Arrays arr = carve(nullptr, groups, &arrays);
    const auto args = arguments(arr, groups, 0, sm_count);
    return arrays + WorkspaceCarve::align(Gemm::get_workspace_size(args));
  }

  static void run(const GroupedGemmArgs& g, cudaStream_t stream);
};

template <int WeightGran, class ElementD, class StrideA, class StrideB, class StrideD, class Shape3>
__global__ void setup_blockwise_kernel(int groups, const int32_t* offsets, int n, int k, const uint8_t* a,
                                       const uint8_t* b, ElementD* d, const float* a_scale, const float* b_scale,
                                       Shape3* problems, const void** ptr_a, const void** ptr_b, ElementD** ptr_d,
                                       const float** ptr_sfa, const float** ptr_sfb, StrideA* stride_a,
                                       StrideB* stride_b, StrideD* stride_d) {
  chain_wait();
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  const int64_t row0 = offsets[g];
  const int rows = offsets[g + 1] - offsets[g];
  const int kb = (k + kBlock - 1) / kBlock, nb = (n + WeightGran - 1) / WeightGran;
  const uint8_t* act = a + row0 * k;
  const uint8_t* wgt = b + static_cast<int64_t>(g) * n * k;
  const float* act_s = a_scale + row0 * kb;
  const float* wgt_s = b_scale + static_cast<int64_t>(g) * nb * kb;
  ptr_d[g] = d + row0 * n;
  problems[g] = Shape3{rows, n, k};
  ptr_a[g] = act;
  ptr_b[g] = wgt;
  ptr_sfa[g] = act_s;
  ptr_sfb[g] = wgt_s;
  stride_a[g] = cutlass::make_cute_packed_stride(StrideA{}, {rows, k, 1});
  stride_b[g] = cutlass::make_cute_packed_stride(StrideB{}, {n, k, 1});
  stride_d[g] = cutlass::make_cute_packed_stride(StrideD{}, {rows, n, 1});
}

template <class TileShape, int WeightGran, class ElementD_, int ClusterN>
void BlockwiseGemm<TileShape, WeightGran, ElementD_, ClusterN>::run(const GroupedGemmArgs& g, cudaStream_t stream) {
  if (g.d_dtype != kDType) throw Error("CUTLASS blockwise GEMM: the instance's D dtype differs from the call's");
  size_t arrays_bytes = 0;
  const Arrays arr = carve(g.workspace, g.groups, &arrays_bytes);
  const unsigned blocks = static_cast<unsigned>((g.groups + 127) / 128);
  launch_chained(setup_blockwise_kernel<WeightGran, ElementD, StrideA, StrideB, StrideD, Shape3>, blocks, 128, 0,
      stream,
      g.groups, g.expert_offsets, static_cast<int>(g.n), static_cast<int>(g.k), static_cast<const uint8_t*>(g.a),
      static_cast<const uint8_t*>(g.b), static_cast<ElementD*>(g.d), g.a_scale, g.b_scale, arr.problems,
      reinterpret_cast<const void**>(arr.ptr_a), reinterpret_cast<const void**>(arr.ptr_b), arr.ptr_d, arr.ptr_sfa,
      arr.ptr_sfb, arr.stride_a, arr.stride_b, arr.stride_d);
  const auto args = arguments(arr, g.groups, g.device, g.sm_count);
  Gemm gemm;
  sm90::check_cutlass(gemm.can_implement(args), "can_implement (fp8 blockwise)");
  sm90::check_cutlass(gemm.initialize(args, arr.cutlass_workspace, stream), "initialize (fp8 blockwise)");
  sm90::check_cutlass(gemm.run(stream), "run (fp8 blockwise)");
}

}  // namespace fusedmoe::cuda::sm90_blockwise
