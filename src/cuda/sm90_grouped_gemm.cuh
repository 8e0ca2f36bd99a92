#pragma once
// The CUTLASS 3.x ptr-array grouped GEMM for Hopper (TMA loads, wgmma, warp-specialised
// persistent kernel), as a template over the operand type and a tile configuration.
// Include only from sm90_grouped_gemm_<family>.cu: each instance costs about a minute and
// several GB of compiler memory, so every family lives in its own translation unit.
//
// Layouts (all row-major in memory): activations [rows, k] and one expert's weights [n, k],
// both K-major: the TN layout wgmma wants for every operand type, fp8 included, so the weights
// need no preparation. D = [rows, n] fp32, or bf16 (ElementD_; the GEMM2 output y of the layers
// that take it: grouped_gemm.hpp, sm90_bf16_d_applies).
// CUTLASS A = activations (RowMajor), B = weights ("ColumnMajor"), D RowMajor; per group
// (M, N, K) = (rows, n, k): these instances serve the calls with many rows per expert. (A swap-AB
// form - the weights on the MMA's 128-row side for few rows - existed until 2026-11-26; the stream
// GEMM, stream_gemm.cu, took its calls, and the unused branch went on 2026-11-27.)
// Problem shapes and pointers are written by setup_groups_kernel from the device expert
// offsets; the host never learns the per-expert row counts (no sync, graph capturable).
#include <cuda_runtime.h>

#include <string>

#include "cuda/cuda_check.hpp"
#include "cuda/chained_launch.cuh"
#include "cuda/grouped_gemm.hpp"
#include "cuda/workspace_carve.hpp"
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#if !defined(CUTLASS_ARCH_MMA_MODIFIABLE_TMA_SM90_SUPPORTED)
#error "The SM90 grouped GEMM needs CUDA 12.3+ (CUTLASS_ARCH_MMA_MODIFIABLE_TMA_SM90_SUPPORTED)"
#endif

namespace fusedmoe::cuda::sm90 {

// A tile configuration: CTA tile, cluster, mainloop and epilogue schedules.
template <class TileShape_, class ClusterShape_, class KernelSchedule_, class EpilogueSchedule_>
struct TileConfig {
  using TileShape = TileShape_;
  using ClusterShape = ClusterShape_;
  using KernelSchedule = KernelSchedule_;
  using EpilogueSchedule = EpilogueSchedule_;
};

// kColScale: D = acc x col_scale[g, n] before D's rounding (GroupedGemmArgs::d_col_scale;
// fp8-channel's GEMM2, sm90_grouped_gemm_fp8_d16_dequant.cu): an epilogue visitor tree - CUTLASS's
// row broadcast (one value per column n for every row of the tile) with one pointer per group (a
// float* element type: IsArrayOfPointers; the group's L stride 0) - instead of D = acc.
template <class TileShape, class ElementD, bool kColScale>
struct GroupedEpilogueFusion {
  using type = cutlass::epilogue::fusion::LinearCombination<ElementD, float>;
};
template <class TileShape, class ElementD>
struct GroupedEpilogueFusion<TileShape, ElementD, true> {
  using ColScales = cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, float*, float,
                                                                 cute::Stride<cute::_0, cute::_1, cute::_0>>;
  using Multiply = cutlass::epilogue::fusion::Sm90Compute<cutlass::multiplies, ElementD, float,
                                                          cutlass::FloatRoundStyle::round_to_nearest>;
  using type = cutlass::epilogue::fusion::Sm90EVT<Multiply, cutlass::epilogue::fusion::Sm90AccFetch, ColScales>;
};

template <class Element, class Config, class ElementD_ = float, bool kColScale = false>
struct GroupedGemm {
  using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;  // (M, N, K) per group
  using Shape3 = typename ProblemShape::UnderlyingProblemShape;
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::ColumnMajor;
  using LayoutD = cutlass::layout::RowMajor;
  using ElementD = ElementD_;
  static constexpr DType kDType = cute::is_same_v<ElementD, float> ? DType::F32 : DType::BF16;
  static_assert(cute::is_same_v<ElementD, float> || cute::is_same_v<ElementD, cutlass::bfloat16_t>);
  static constexpr int kAlignAB = 128 / cutlass::sizeof_bits<Element>::value;  // 16-byte TMA rows
  static constexpr int kAlignD = 128 / cutlass::sizeof_bits<ElementD>::value;
  using TileShape = typename Config::TileShape;
  static_assert(cute::size<0>(TileShape{}) % 64 == 0, "wgmma M tiles are multiples of 64 rows");
  static_assert(cute::size<2>(TileShape{}) * cutlass::sizeof_bits<Element>::value % (64 * 8) == 0,
                "the K tile must span whole 64-byte swizzle atoms");

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, typename Config::ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float,
      void, LayoutD*, kAlignD,  // no C operand: D = acc
      ElementD, LayoutD*, kAlignD, typename Config::EpilogueSchedule,
      typename GroupedEpilogueFusion<TileShape, ElementD, kColScale>::type>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA*, kAlignAB, Element, LayoutB*, kAlignAB,
      float, TileShape, typename Config::ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      typename Config::KernelSchedule>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;

  // Per-group argument arrays at the front of the workspace, then CUTLASS's own workspace.
  struct Arrays {
    Shape3* problems;
    const Element** ptr_a;
    const Element** ptr_b;
    ElementD** ptr_d;
    StrideA* stride_a;
    StrideB* stride_b;
    StrideD* stride_d;
    const float** col_scales;  // kColScale: group g's d_col_scale + g * n
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
    a.stride_a = w.take<StrideA>(g);
    a.stride_b = w.take<StrideB>(g);
    a.stride_d = w.take<StrideD>(g);
    a.col_scales = kColScale ? w.take<const float*>(g) : nullptr;
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
    args.mainloop = {arr.ptr_a, arr.stride_a, arr.ptr_b, arr.stride_b};
    args.epilogue.ptr_C = nullptr;
    args.epilogue.dC = arr.stride_d;
    args.epilogue.ptr_D = arr.ptr_d;
    args.epilogue.dD = arr.stride_d;
    if constexpr (kColScale) {
      args.epilogue.thread = {{}, {arr.col_scales}, {}};  // the tree's: {acc, column scales, multiply}
    } else {
      auto& f = args.epilogue.thread;
      f.alpha = 1.0f;  // D = acc exactly
      f.beta = 0.0f;
      f.alpha_ptr = nullptr;
      f.beta_ptr = nullptr;
      f.alpha_ptr_array = nullptr;
      f.beta_ptr_array = nullptr;
      f.dAlpha = {cute::_0{}, cute::_0{}, 0};
      f.dBeta = {cute::_0{}, cute::_0{}, 0};
    }
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

template <bool kColScale, class Element, class ElementD, class StrideA, class StrideB, class StrideD, class Shape3>
__global__ void setup_groups_kernel(int groups, const int32_t* offsets, int n, int k, const Element* a,
                                    const Element* b, ElementD* d, Shape3* problems, const Element** ptr_a,
                                    const Element** ptr_b, ElementD** ptr_d, StrideA* stride_a, StrideB* stride_b,
                                    StrideD* stride_d, const float* col_scale, const float** col_scales) {
  chain_wait();
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  const int64_t row0 = offsets[g];
  const int rows = offsets[g + 1] - offsets[g];
  const Element* act = a + row0 * k;
  const Element* wgt = b + static_cast<int64_t>(g) * n * k;
  ptr_d[g] = d + row0 * n;
  if constexpr (kColScale) col_scales[g] = col_scale + static_cast<int64_t>(g) * n;
  problems[g] = Shape3{rows, n, k};
  ptr_a[g] = act;
  ptr_b[g] = wgt;
  stride_a[g] = cutlass::make_cute_packed_stride(StrideA{}, {rows, k, 1});
  stride_b[g] = cutlass::make_cute_packed_stride(StrideB{}, {n, k, 1});
  stride_d[g] = cutlass::make_cute_packed_stride(StrideD{}, {rows, n, 1});
}

inline void check_cutlass(cutlass::Status s, const char* what) {
  if (s != cutlass::Status::kSuccess)
    throw Error(std::string("CUTLASS grouped GEMM: ") + what + " failed: " + cutlass::cutlassGetStatusString(s));
}

template <class Element, class Config, class ElementD_, bool kColScale>
void GroupedGemm<Element, Config, ElementD_, kColScale>::run(const GroupedGemmArgs& g, cudaStream_t stream) {
  if (g.d_dtype != kDType) throw Error("CUTLASS grouped GEMM: the instance's D dtype differs from the call's");
  if ((g.d_col_scale != nullptr) != kColScale)
    throw Error(kColScale ? "CUTLASS grouped GEMM: the column-scale instance needs d_col_scale"
                          : "CUTLASS grouped GEMM: d_col_scale asked of an instance without column scales");
  size_t arrays_bytes = 0;
  const Arrays arr = carve(g.workspace, g.groups, &arrays_bytes);
  const unsigned blocks = static_cast<unsigned>((g.groups + 127) / 128);
  constexpr auto setup = setup_groups_kernel<kColScale, Element, ElementD, StrideA, StrideB, StrideD, Shape3>;
  launch_chained(setup, blocks, 128, 0, stream,
      g.groups, g.expert_offsets, static_cast<int>(g.n), static_cast<int>(g.k), static_cast<const Element*>(g.a),
      static_cast<const Element*>(g.b), static_cast<ElementD*>(g.d), arr.problems, arr.ptr_a, arr.ptr_b, arr.ptr_d,
      arr.stride_a, arr.stride_b, arr.stride_d, g.d_col_scale, arr.col_scales);
  const auto args = arguments(arr, g.groups, g.device, g.sm_count);
  Gemm gemm;
  check_cutlass(gemm.can_implement(args), "can_implement");
  check_cutlass(gemm.initialize(args, arr.cutlass_workspace, stream), "initialize");
  check_cutlass(gemm.run(stream), "run");
}

}  // namespace fusedmoe::cuda::sm90
