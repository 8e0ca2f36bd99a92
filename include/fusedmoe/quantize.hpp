#pragma once
// CPU quantisers for every format: the exact steps of docs/LAYER_FILE.md (activations) and
// the weight encoders used by `fusedmoe quantize`. All row-major, contiguous, float input.
// amax ignores NaN (as fmaxf). Callers may split any call by rows (pointer offsets), the 128x128
// block weights by 128-row stripes. Column counts that break a packing/block rule throw
// InvalidArgument.
#include <cstdint>
#include <vector>

#include "fusedmoe/codecs.hpp"

namespace fusedmoe {

// ---- activations (and weights with the same recipes) ----
// Per tensor: s = amax / 448 (or the given static scale); q = e4m3(clamp(x / s, +-448)).
// s == 0 (an all-zero tensor): zeros stay (signed) zeros instead of 0/0 = NaN.
float fp8_tensor_scale(const float* x, int64_t n);
void quantize_fp8_with_scale(const float* x, int64_t n, float scale, uint8_t* q);
// Per row: s[r] = max(amax_row, 1e-10) / 448.
void quantize_fp8_per_row(const float* x, int64_t rows, int64_t cols, uint8_t* q, float* scales);
// Per row and group of `group` along cols: s[r][g] = max(amax, 1e-10) / 448
// (ue8m0: rounded up to a power of two). scales: [rows, ceil(cols/group)] row-major.
void quantize_fp8_per_token_group(const float* x, int64_t rows, int64_t cols, int64_t group,
                                  bool ue8m0, uint8_t* q, float* scales);
// NVFP4 with a given global encode scale gs: per block of 16:
// sf = e4m3(gs * amax / 6); q = e2m1(x * gs / sf) (q = 0 where sf == 0).
// q: packed [rows, cols/2]; sf: e4m3 codes [rows, cols/16]; cols a multiple of 16.
void quantize_nvfp4(const float* x, int64_t rows, int64_t cols, float global_scale, uint8_t* q,
                    uint8_t* sf);
// gs = 448 * 6 / amax (amax == 0 -> 1).
float nvfp4_global_scale(const float* x, int64_t n);

// ---- weights ----
// 128x128 blocks: s = max(amax_block, 1e-10) / 448; scales [ceil(rows/128), ceil(cols/128)].
void quantize_fp8_block_weight(const float* w, int64_t rows, int64_t cols, uint8_t* q,
                               float* scales);
// MXFP4: per block of 32 along cols, e8m0 scale from amax with the given rounding;
// q = e2m1(x / 2^e). q packed [rows, cols/2], scales [rows, cols/32]; cols a multiple of 32.
void quantize_mxfp4(const float* w, int64_t rows, int64_t cols, Mxfp4ScaleRounding rounding,
                    uint8_t* q, uint8_t* scales);
// W4A8 int4 weights with bf16 group-128 scales: s = amax_group / 7 rounded to bf16 (1 if 0),
// q = clamp(rne(x / s), -8, 7). q: int8 values [rows, cols]; scales: bf16 bits
// [rows, ceil(cols/group)] (a last, shorter group is allowed).
void quantize_int4_group(const float* w, int64_t rows, int64_t cols, int64_t group, int8_t* q,
                         uint16_t* scales_bf16);
// The W4A8 scale split (SEMANTICS.md): per row c = 8 * amax_row(s) / 448 (fp32) and
// g = e4m3(s / c). s: bf16 bits [rows, groups]; c: [rows]; g: e4m3 codes [rows, groups].
// An all-zero row gets c = 1 (so g = 0 and nobody divides by zero).
void w4a8_split_scales(const uint16_t* s_bf16, int64_t rows, int64_t groups, float* c,
                       uint8_t* g);

}  // namespace fusedmoe
