// SM90 grouped GEMM for fp8-channel GEMM2 at large batches: the cooperative 128x256 FP8FastAccum
// config of the other fp8 instances, whose epilogue applies the expert's per-output-channel
// weight scale before y is rounded to bf16:
//   y[r, c] = bf16( acc[r, c] x w[e, c] )
// (the row's activation scale stays a per-slot factor of the finalize). Without it the finalize
// applied w[e, c] per slot and column, reading the [E, hidden] scale table once per slot of every
// token - at DeepSeek-V3 TP8 with 4096 tokens 0.94 GB of L2 reads next to y's 0.47 GB (fp8-channel's
// finalize 271 us against fp8-tensor's 190 us, H100). The scales are an epilogue visitor tree
// (CUTLASS EVT: a row broadcast with one pointer per group, set by the setup kernel), so the
// mainloop is the one of sm90_grouped_gemm_fp8_d16.cu. Its own file: each instance costs about a
// minute and several GB of compiler memory.
#include "cuda/sm90_grouped_gemm_configs.cuh"

#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"

namespace fusedmoe::cuda {
namespace {

using cutlass::epilogue::fusion::Sm90AccFetch;
using cutlass::epilogue::fusion::Sm90Compute;
using cutlass::epilogue::fusion::Sm90EVT;
using cutlass::epilogue::fusion::Sm90RowBroadcast;

using Config = sm90::Fp8LargeConfig;
using TileShape = Config::TileShape;
using Element = cutlass::float_e4m3_t;
using ElementD = cutlass::bfloat16_t;
using LayoutA = cutlass::layout::RowMajor;
using LayoutB = cutlass::layout::ColumnMajor;
using LayoutD = cutlass::layout::RowMajor;
constexpr int kAlignAB = 16;
constexpr int kAlignD = 8;
constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;

// A value per column n (CUTLASS's row broadcast: one row vector for every row of the tile); the
// float* element type gives one pointer per group (IsArrayOfPointers), the group's L stride 0.
using ChannelScales = Sm90RowBroadcast<0, TileShape, float*, float, cute::Stride<cute::_0, cute::_1, cute::_0>>;
using DequantD = Sm90EVT<Sm90Compute<cutlass::multiplies, ElementD, float, kRound>, Sm90AccFetch, ChannelScales>;

using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
using Shape3 = typename ProblemShape::UnderlyingProblemShape;

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, Config::ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD*, kAlignD, ElementD, LayoutD*,
    kAlignD, Config::EpilogueSchedule, DequantD>::CollectiveOp;

using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA*, kAlignAB, Element, LayoutB*, kAlignAB,
    float, TileShape, Config::ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<
        static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
    Config::KernelSchedule>::CollectiveOp;

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
  StrideA* stride_a;
  StrideB* stride_b;
  StrideD* stride_d;
  const float** channel_scales;  // group g: d_col_scale + g * n
  void* cutlass_workspace;
};

Arrays carve(void* base, int groups, size_t* total) {
  WorkspaceCarve w(base);
  const size_t g = static_cast<size_t>(groups);
  Arrays a;
  a.problems = w.take<Shape3>(g);
  a.ptr_a = w.take<const Element*>(g);
  a.ptr_b = w.take<const Element*>(g);
  a.ptr_d = w.take<ElementD*>(g);
  a.stride_a = w.take<StrideA>(g);
  a.stride_b = w.take<StrideB>(g);
  a.stride_d = w.take<StrideD>(g);
  a.channel_scales = w.take<const float*>(g);
  a.cutlass_workspace = w.next();
  *total = w.used();
  return a;
}

typename Gemm::Arguments arguments(const Arrays& arr, int groups, int device, int sm_count) {
  cutlass::KernelHardwareInfo hw;
  hw.device_id = device;
  hw.sm_count = sm_count;
  typename Gemm::Arguments args;
  args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
  args.problem_shape = {groups, arr.problems, nullptr};  // shapes live on the device only
  args.mainloop = {arr.ptr_a, arr.stride_a, arr.ptr_b, arr.stride_b};
  args.epilogue.ptr_C = nullptr;
  args.epilogue.dC = arr.stride_d;
  args.epilogue.ptr_D = arr.ptr_d;
  args.epilogue.dD = arr.stride_d;
  // The tree's arguments: {acc, channel scales, multiply}.
  args.epilogue.thread = {{}, {arr.channel_scales}, {}};
  args.hw_info = hw;
  return args;
}

__global__ void setup_dequant_groups_kernel(int groups, const int32_t* offsets, int n, int k, const Element* a,
                                            const Element* b, ElementD* d, const float* col_scale, Arrays arr) {
  chain_wait();
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  const int64_t row0 = offsets[g];
  const int rows = offsets[g + 1] - offsets[g];
  arr.problems[g] = Shape3{rows, n, k};
  arr.ptr_a[g] = a + row0 * k;
  arr.ptr_b[g] = b + static_cast<int64_t>(g) * n * k;
  arr.ptr_d[g] = d + row0 * n;
  arr.stride_a[g] = cutlass::make_cute_packed_stride(StrideA{}, {rows, k, 1});
  arr.stride_b[g] = cutlass::make_cute_packed_stride(StrideB{}, {n, k, 1});
  arr.stride_d[g] = cutlass::make_cute_packed_stride(StrideD{}, {rows, n, 1});
  arr.channel_scales[g] = col_scale + static_cast<int64_t>(g) * n;
}

}  // namespace

size_t sm90_grouped_gemm_fp8_d16_dequant_workspace(int groups, int sm_count) {
  size_t arrays = 0;
  const Arrays arr = carve(nullptr, groups, &arrays);
  return arrays + WorkspaceCarve::align(Gemm::get_workspace_size(arguments(arr, groups, 0, sm_count)));
}

void sm90_grouped_gemm_fp8_d16_dequant(const GroupedGemmArgs& g, cudaStream_t stream) {
  if (g.d_dtype != DType::BF16 || g.op != Operand::FP8 || g.d_col_scale == nullptr)
    throw Error("CUTLASS grouped GEMM (fp8, channel scales in the epilogue): needs fp8 operands, a bf16 D and "
                "d_col_scale");
  size_t arrays_bytes = 0;
  const Arrays arr = carve(g.workspace, g.groups, &arrays_bytes);
  const unsigned blocks = static_cast<unsigned>((g.groups + 127) / 128);
  launch_chained(setup_dequant_groups_kernel, blocks, 128, 0, stream, g.groups, g.expert_offsets,
                 static_cast<int>(g.n), static_cast<int>(g.k), static_cast<const Element*>(g.a),
                 static_cast<const Element*>(g.b), static_cast<ElementD*>(g.d), g.d_col_scale, arr);
  const auto args = arguments(arr, g.groups, g.device, g.sm_count);
  Gemm gemm;
  sm90::check_cutlass(gemm.can_implement(args), "can_implement");
  sm90::check_cutlass(gemm.initialize(args, arr.cutlass_workspace, stream), "initialize");
  sm90::check_cutlass(gemm.run(stream), "run");
}

}  // namespace fusedmoe::cuda
