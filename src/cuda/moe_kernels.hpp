#pragma once
// The stages of the CUDA backend and their launchers (one kernel family per .cu file):
//   permute.cu    routing plan (expert counts/offsets, stable slot order) + GEMM1 operand gather
//   activation.cu bias1 + activation + rounding + GEMM2 operand quantisation
//   finalize.cu   GEMM2 dequant + bias2 + weighted top-k sum
//   grouped_gemm.hpp / sm90_grouped_gemm_*.cu / simt_grouped_gemm.cu  the two grouped GEMMs
// Everything is launched on the caller's stream with no allocation and no host sync.
//
// Terms: a *slot* is one (token, k) pair, flattened i = t * topk + k. A *row* is a slot that
// selects a local expert, at its position in the expert-grouped (permuted) order.
#include <cuda_runtime.h>

#include <cstdint>

#include "fusedmoe/config.hpp"
#include "fusedmoe/tensor.hpp"

namespace fusedmoe::cuda {

// Operand type of the grouped GEMMs (the weights' type; activations are converted to it).
enum class Operand : uint8_t { BF16, FP16, FP32, FP8 };

// The k order a 16-bit GEMM operand is stored in for the 4-bit kernel that reads it (w4_kperm.cuh):
// as is, the wgmma kernel's order inside 64-column groups, or the mma kernel's inside 8-column groups.
enum class KOrder : uint8_t { NATURAL, W4_WGMMA, W4_MMA };

// How a GEMM's activation operand is quantised to fp8 (LAYER_FILE.md).
enum class Fp8Quant : uint8_t {
  NONE,            // 16/32-bit operand: a plain conversion
  TENSOR_STATIC,   // q = e4m3(x / s), s = the layer's input scale
  TENSOR_DYNAMIC,  // same with s = max(amax over the operand, 1e-10) / 448
  ROW,             // per row: s = max(amax_row, 1e-10) / 448
  BLOCK,           // fp8-block: per row and 128-wide column group, s = max(amax_group, 1e-10) / 448
                   // (rounded up to 2^k with fp8_block_ue8m0); scales in the GEMM's layout
  NVFP4,           // nvfp4 W4A4 (not fp8): per 16-wide block with the expert's global scale gs =
                   // 1 / input_scale[e]: sf = e4m3(gs * amax / 6), q = e2m1(x * gs / sf); the
                   // operand holds e2m1(q) * sf as bf16 (exact), 1 / gs is applied after the GEMM
};
// ROW with a 16-bit operand (the 4-bit formats, w4_gemm.hpp): the e4m3 code's value is stored
// as bf16 / fp16 (exact) instead of the code byte.

// fp8-block activation scales (BLOCK): the group scales of the rows of one expert form a
// column-major [groups, rows_e] block starting at float row0 * groups (row0 = the expert's first
// row), the per-group layout the blockwise grouped GEMM reads (grouped_gemm.hpp). The whole
// buffer is [rows, groups] floats.
struct BlockScaleOut {
  float* scale = nullptr;                   // [rows * groups]
  const int32_t* row_expert = nullptr;      // [rows]
  const int32_t* expert_offsets = nullptr;  // [E + 1]
  bool ue8m0 = false;                       // scales rounded up to a power of two
};

// A per-tensor fp8 scale on the device: either a scale, or an amax (as float bits written by
// atomicMax) that the consumer turns into max(amax, 1e-10) / 448.
struct TensorScale {
  const float* ptr = nullptr;
  bool from_amax = false;
};

// Largest expert count the plan kernels keep in shared memory (E ints per block).
constexpr int kMaxExperts = 4096;
// Rows per tile of the SIMT grouped GEMM; the plan computes tiles per expert for it.
constexpr int kSimtTileM = 64;

// ---------------------------------------------------------------- permute.cu
struct PlanBuffers {
  int32_t* slot_expert = nullptr;     // [slots] local expert or -1 (plan scratch: chunked, or one block > 1024 slots)
  int32_t* slot_row = nullptr;        // [slots] row of the slot, or -1 (contributes nothing)
  int32_t* row_slot = nullptr;        // [slots] slot of each row (first offsets[E] valid)
  int32_t* row_expert = nullptr;      // [slots] expert of each row
  int32_t* expert_offsets = nullptr;  // [E + 1] first row of each expert; [E] = rows
  int32_t* tile_offsets = nullptr;    // [E + 1] first SIMT tile (kSimtTileM rows) of each expert
  int32_t* chunk_counts = nullptr;    // [plan_chunks(slots) * E] general path scratch
};
int64_t plan_chunks(int64_t slots);
// ids: [slots] (global ids); expert_map: [num_global] or nullptr (then num_global == E).
void launch_plan(const int32_t* ids, const int32_t* expert_map, int64_t slots, int num_experts,
                 int64_t num_global, const PlanBuffers& plan, cudaStream_t stream);

struct GatherParams {
  const void* x = nullptr;  // hidden_states [M, K]
  DType x_dtype = DType::BF16;
  int64_t K = 0;
  int64_t topk = 1;
  const float* topk_weights = nullptr;  // [M, topk]
  bool on_input = false;                // scale rows by the router weight (then round to x_dtype)
  const int32_t* row_slot = nullptr;
  const int32_t* rows = nullptr;  // device pointer to the row count (expert_offsets + E)
  void* out = nullptr;            // [rows, K] operand
  Operand op = Operand::BF16;
  Fp8Quant quant = Fp8Quant::NONE;
  KOrder korder = KOrder::NATURAL;  // the 4-bit GEMMs' k order of a 16-bit operand (w4_kperm.cuh)
  TensorScale scale;             // TENSOR_*
  float* row_scale = nullptr;    // ROW: [rows] output scales
  BlockScaleOut block;           // BLOCK (row_expert is set for every mode)
  const float* nvfp4_input_scale = nullptr;  // NVFP4: [E]
  // Token-major gather (token_gather_applies): the tokens and the row of each slot (-1: none).
  int64_t M = 0;
  const int32_t* slot_row = nullptr;  // [M * topk]
};
// Dynamic per-tensor scale of GEMM1's operand: amax of hidden_states (all M rows), or of the
// router-weighted rows when on_input. *amax_bits must be zeroed first (launcher does it).
void launch_gemm1_amax(const GatherParams& p, int64_t M, int64_t max_rows, float* amax_bits, cudaStream_t stream);
void launch_gather(const GatherParams& p, int64_t max_rows, cudaStream_t stream);
// Whether launch_gather reads each token once and stores it to all its slots' rows (many tokens,
// no router weight on the input, a vector gather's format; permute.cu).
constexpr int64_t kTokenGatherMinTokens = 256;
bool token_gather_applies(const GatherParams& p);
// GEMM1's operand for the gathered GEMM1 (sm90_gemm1_gather_applies): hidden_states' static
// fp8-tensor codes in token order, [M, K] into p.out (no router weight on the input; permute.cu);
// or its per-token (ROW, fp8-channel) codes, each token's scale written to p.row_scale at the
// rows of its slots (p.slot_row).
bool token_codes_applies(const GatherParams& p);
void launch_token_codes(const GatherParams& p, cudaStream_t stream);
// Decode-sized calls (at most 256 slots, a vector gather's format): launch_plan and launch_gather
// in one kernel, the same plan arrays and the same operand rows (permute.cu).
bool plan_gather_fused_applies(const GatherParams& p, int64_t slots);
void launch_plan_gather(const int32_t* ids, const int32_t* expert_map, int64_t slots, int num_experts,
                        int64_t num_global, const PlanBuffers& plan, const GatherParams& p, cudaStream_t stream);

// ---------------------------------------------------------------- activation.cu
struct Dequant {
  // GEMM output (r, c) of expert e is multiplied by a(r) * w(e, c) (fp8 formats only).
  // GENERIC (4-bit formats): a_row[r] * a_expert[e] * w_expert[e], each factor 1 when null.
  enum Kind : uint8_t { NONE, TENSOR, CHANNEL, GENERIC } kind = NONE;
  TensorScale a_tensor;              // TENSOR: activation scale
  const float* a_row = nullptr;      // CHANNEL, GENERIC: [rows] activation scales
  const float* w = nullptr;          // TENSOR: [E]; CHANNEL: [E, cols]
  const float* a_expert = nullptr;   // GENERIC: [E] (nvfp4 activation input_scale)
  const float* w_expert = nullptr;   // GENERIC: [E] (nvfp4 weight scale_2)
};

struct ActivationParams {
  const float* h = nullptr;  // GEMM1 output [rows, R], unscaled
  int64_t R = 0, N = 0;
  const int32_t* row_expert = nullptr;
  const int32_t* rows = nullptr;  // device row count
  Activation act = Activation::SILU;
  GateUpOrder order = GateUpOrder::GATE_UP;
  bool interleaved = false;
  float alpha = 1.702f, limit = 7.0f;
  const float* bias = nullptr;  // [E, R] or nullptr
  Dequant dq;
  DType act_dtype = DType::BF16;  // the activation output is rounded to this (hidden dtype)
  void* out = nullptr;            // [rows, N] GEMM2 operand
  Operand op = Operand::BF16;
  Fp8Quant quant = Fp8Quant::NONE;
  KOrder korder = KOrder::NATURAL;  // the 4-bit GEMMs' k order of a 16-bit operand (w4_kperm.cuh)
  TensorScale scale;           // TENSOR_STATIC
  float* amax_bits = nullptr;  // TENSOR_DYNAMIC: amax of the activation output (zeroed by launcher)
  float* staging = nullptr;    // TENSOR_DYNAMIC / ROW: [rows, N] rounded activation output
  float* row_scale = nullptr;  // ROW: [rows] output scales
  BlockScaleOut block;         // BLOCK
  const float* nvfp4_input_scale = nullptr;  // NVFP4: [E]
  // BLOCK / ROW after the fp8-block / fp8-channel GEMM1 + activation (sm90_gemm1_block_act_applies,
  // sm90_gemm1_channel_act_applies): the activation output already rounded to bf16, [rows, N];
  // launch_activation then only quantises it (h unused).
  const uint16_t* act_bf16 = nullptr;
  // The plan (rows, row_expert) and the dequant factors' arrays are final when the activation starts
  // (two or more chained kernels back), so its row kernels may read a row's expert and factor before
  // their wait (activation.cu, for_each_row). A permission: kernels that wait first ignore it.
  bool early = false;
};
void launch_activation(const ActivationParams& p, int64_t max_rows, cudaStream_t stream);
// Tests: which kernel quantises bf16 rows to nvfp4 (act_bf16 with quant NVFP4) - > 0 the flat kernel with at most
// that many blocks (several grid-stride passes on small inputs), < 0 the block-per-row kernel, 0 the rule.
void nvfp4_flat_test_grid(int cap);

// ---------------------------------------------------------------- finalize.cu
struct FinalizeParams {
  const void* y = nullptr;  // GEMM2 output [rows, K] of y_dtype, unscaled
  DType y_dtype = DType::F32;  // F32 or BF16 (sm90_bf16_d_applies)
  // GEMM2's k range split in two (w4_mma_split_pays): the second half's fp32 sums [rows, K], added to y's once (y
  // first) before the slot's terms. F32 y only; nullptr: none.
  const float* y2 = nullptr;
  int64_t M = 0, K = 0, topk = 1;
  const int32_t* slot_row = nullptr;
  const int32_t* row_expert = nullptr;
  const float* topk_weights = nullptr;
  bool on_input = false;        // weight 1 in the sum
  const float* bias = nullptr;  // [E, K] or nullptr
  Dequant dq;
  void* out = nullptr;  // [M, K] hidden dtype
  DType out_dtype = DType::BF16;
  // The plan (slot_row, row_expert) and the dequant factors' arrays are final when the finalize
  // starts - written two or more chained kernels back (chained_launch.cuh) - so the vector kernel
  // reads its first token's slots before its wait. Only the caller knows the chain; default false.
  bool early = false;
};
void launch_finalize(const FinalizeParams& p, cudaStream_t stream);
bool finalize_supports_topk(int64_t topk);

}  // namespace fusedmoe::cuda
