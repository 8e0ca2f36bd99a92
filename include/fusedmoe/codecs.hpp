#pragma once
// Scalar codecs of the low-precision formats, bit-exact with CUDA's own host conversions
// (cuda_fp8.h / cuda_fp4.h / cuda_bf16.h): round to nearest even everywhere.
// Saturation: e4m3 and e2m1 saturate finite overflow to +-max (e4m3 Inf -> +-448, NaN -> NaN);
// e5m2 follows __NV_SATFINITE too (finite overflow -> +-57344, Inf -> +-57344, NaN -> NaN).
#include <cstddef>
#include <cstdint>

namespace fusedmoe {

// ---- 16-bit floats ----
uint16_t float_to_bf16_bits(float x);  // RNE; NaN -> 0x7fff (CUDA's canonical NaN, sign dropped)
float bf16_bits_to_float(uint16_t b);
uint16_t float_to_fp16_bits(float x);  // RNE, overflow -> Inf; NaN -> 0x7fff
float fp16_bits_to_float(uint16_t b);
inline float round_bf16(float x) { return bf16_bits_to_float(float_to_bf16_bits(x)); }
inline float round_fp16(float x) { return fp16_bits_to_float(float_to_fp16_bits(x)); }

// ---- FP8 ----
constexpr float kE4M3Max = 448.0f;
constexpr float kE5M2Max = 57344.0f;
// RNE, saturating (as __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)); NaN -> 0x7f.
uint8_t float_to_e4m3(float x);
float e4m3_to_float(uint8_t b);  // 0x7f / 0xff are NaN
uint8_t float_to_e5m2(float x);  // RNE, saturating; NaN -> 0x7f
float e5m2_to_float(uint8_t b);
inline float round_e4m3(float x) { return e4m3_to_float(float_to_e4m3(x)); }

// ---- FP4 E2M1 (magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6) ----
constexpr float kE2M1Max = 6.0f;
uint8_t float_to_e2m1(float x);  // 4-bit code in the low nibble; RNE, saturating; NaN -> +6 (as cuda_fp4.h)
float e2m1_to_float(uint8_t code);  // low nibble used
// Two values per byte, element 2i in the low nibble. n = number of values (even).
void pack_e2m1(const float* x, size_t n, uint8_t* out);
void unpack_e2m1(const uint8_t* in, size_t n, float* out);

// ---- E8M0 / UE8M0 scales (2^(code-127); 0xff = NaN) ----
float e8m0_to_float(uint8_t code);
// Exponent rounding used to pick an MXFP4 block scale from the block's amax.
enum class Mxfp4ScaleRounding : uint8_t {
  OCP,     // e = floor(log2(amax)) - 2 (OCP MX spec; values past 6*2^e clip)
  NVIDIA,  // e = ceil(log2(amax / 6)) (vLLM, FlashInfer kernels)
};
const char* mxfp4_rounding_name(Mxfp4ScaleRounding r);
// E8M0 code for a block with this |amax| (amax == 0 -> 2^-127's code 0; clamped to [0, 254];
// NaN -> 0xff). Exact: the exponent comes from frexp, never from a rounded log2.
uint8_t mxfp4_scale_code(float amax, Mxfp4ScaleRounding rounding);
// Smallest power of two >= x (UE8M0 round-up of a positive scale), as a float; x <= 0, Inf and
// NaN are returned unchanged.
float round_up_pow2(float x);

// ---- int4 ----
// Signed int4 (two's complement) and uint4b8 (q + 8), two per byte, element 2i in the low nibble.
void pack_int4(const int8_t* q, size_t n, uint8_t* out);  // q in [-8, 7]
void unpack_int4(const uint8_t* in, size_t n, int8_t* out);
void pack_uint4b8(const int8_t* q, size_t n, uint8_t* out);
void unpack_uint4b8(const uint8_t* in, size_t n, int8_t* out);

// ---- The 128x4 swizzled scale layout (FlashInfer / CUTLASS block-scaled MMA; vLLM's
// swizzle_mxfp4_scales). Flat [rows, cols] bytes -> padded [round_up(rows,128), round_up(cols,4)]
// swizzled; padding bytes are 0.
size_t swizzled_scale_bytes(int64_t rows, int64_t cols);
size_t swizzled_scale_offset(int64_t m, int64_t k, int64_t cols);
void swizzle_scales_128x4(const uint8_t* flat, int64_t rows, int64_t cols, uint8_t* swizzled);
void unswizzle_scales_128x4(const uint8_t* swizzled, int64_t rows, int64_t cols, uint8_t* flat);

}  // namespace fusedmoe
