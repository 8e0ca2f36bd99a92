// CPU quantisers: the exact steps of docs/LAYER_FILE.md. Operation order matters for bit-exactness
// (x / s, not x * (1/s), unless 1/s is exact); amax skips NaN (a NaN compares false), as fmaxf.
#include "fusedmoe/quantize.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "fusedmoe/error.hpp"

namespace fusedmoe {
namespace {

constexpr float kMinAmax = 1e-10f;

inline float amax_of(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    m = a > m ? a : m;
  }
  return m;
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void check_shape(int64_t rows, int64_t cols) {
  if (rows < 0) throw InvalidArgument("rows", ">= 0", std::to_string(rows));
  if (cols < 0) throw InvalidArgument("cols", ">= 0", std::to_string(cols));
}

void check_multiple(const char* what, int64_t cols, int64_t m) {
  if (cols % m != 0)
    throw InvalidArgument(what, "a multiple of " + std::to_string(m), std::to_string(cols));
}

// x / s, except that 0 / 0 (an all-zero tensor with its zero scale) gives 0, not NaN.
inline uint8_t e4m3_div(float x, float s) { return float_to_e4m3(x == 0.0f ? x : x / s); }

// Round to nearest even for |v| <= 8 without the FP environment or libm: trunc, then fix up.
inline int rne_small(float v) {
  int i = static_cast<int>(v);
  const float f = v - static_cast<float>(i);  // exact
  const int odd = i & 1;
  i += (f > 0.5f) | ((f == 0.5f) & odd);
  i -= (f < -0.5f) | ((f == -0.5f) & odd);
  return i;
}

}  // namespace

// ---- activations ----
float fp8_tensor_scale(const float* x, int64_t n) { return amax_of(x, n) / kE4M3Max; }

void quantize_fp8_with_scale(const float* x, int64_t n, float scale, uint8_t* q) {
  for (int64_t i = 0; i < n; ++i) q[i] = e4m3_div(x[i], scale);
}

void quantize_fp8_per_row(const float* x, int64_t rows, int64_t cols, uint8_t* q, float* scales) {
  check_shape(rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float s = std::max(amax_of(xr, cols), kMinAmax) / kE4M3Max;
    scales[r] = s;
    for (int64_t c = 0; c < cols; ++c) q[r * cols + c] = float_to_e4m3(xr[c] / s);
  }
}

void quantize_fp8_per_token_group(const float* x, int64_t rows, int64_t cols, int64_t group,
                                  bool ue8m0, uint8_t* q, float* scales) {
  check_shape(rows, cols);
  if (group <= 0) throw InvalidArgument("group", "> 0", std::to_string(group));
  const int64_t groups = ceil_div(cols, group);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t c0 = g * group, c1 = std::min(cols, c0 + group);
      const float* xr = x + r * cols;
      float s = std::max(amax_of(xr + c0, c1 - c0), kMinAmax) / kE4M3Max;
      if (ue8m0) s = round_up_pow2(s);
      scales[r * groups + g] = s;
      for (int64_t c = c0; c < c1; ++c) q[r * cols + c] = float_to_e4m3(xr[c] / s);
    }
  }
}

void quantize_nvfp4(const float* x, int64_t rows, int64_t cols, float global_scale, uint8_t* q,
                    uint8_t* sf) {
  check_shape(rows, cols);
  check_multiple("cols", cols, 16);
  const float gs = global_scale;
  const int64_t blocks = cols / 16;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* xb = x + r * cols + b * 16;
      const uint8_t code = float_to_e4m3(gs * amax_of(xb, 16) / kE2M1Max);
      sf[r * blocks + b] = code;
      const float s = e4m3_to_float(code);
      uint8_t* qb = q + (r * cols + b * 16) / 2;
      if (s == 0.0f) {  // all-zero block (or gs * amax below e4m3's range)
        std::fill(qb, qb + 8, uint8_t{0});
        continue;
      }
      for (int i = 0; i < 16; i += 2)
        qb[i / 2] = static_cast<uint8_t>(float_to_e2m1(xb[i] * gs / s) |
                                         (float_to_e2m1(xb[i + 1] * gs / s) << 4));
    }
  }
}

float nvfp4_global_scale(const float* x, int64_t n) {
  const float amax = amax_of(x, n);
  return amax == 0.0f ? 1.0f : kE4M3Max * kE2M1Max / amax;
}

// ---- weights ----
void quantize_fp8_block_weight(const float* w, int64_t rows, int64_t cols, uint8_t* q,
                               float* scales) {
  check_shape(rows, cols);
  constexpr int64_t B = 128;
  const int64_t col_blocks = ceil_div(cols, B);
  std::vector<float> amax(static_cast<size_t>(col_blocks));
  for (int64_t r0 = 0; r0 < rows; r0 += B) {
    const int64_t r1 = std::min(rows, r0 + B);
    // Row by row over the stripe (sequential memory), one running amax per column block.
    std::fill(amax.begin(), amax.end(), 0.0f);
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t cb = 0; cb < col_blocks; ++cb) {
        const int64_t c0 = cb * B, c1 = std::min(cols, c0 + B);
        amax[cb] = std::max(amax[cb], amax_of(w + r * cols + c0, c1 - c0));
      }
    float* srow = scales + (r0 / B) * col_blocks;
    for (int64_t cb = 0; cb < col_blocks; ++cb) srow[cb] = std::max(amax[cb], kMinAmax) / kE4M3Max;
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < cols; ++c) q[r * cols + c] = float_to_e4m3(w[r * cols + c] / srow[c / B]);
  }
}

void quantize_mxfp4(const float* w, int64_t rows, int64_t cols, Mxfp4ScaleRounding rounding,
                    uint8_t* q, uint8_t* scales) {
  check_shape(rows, cols);
  check_multiple("cols", cols, 32);
  const int64_t blocks = cols / 32;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* wb = w + r * cols + b * 32;
      const uint8_t code = mxfp4_scale_code(amax_of(wb, 32), rounding);
      scales[r * blocks + b] = code;
      // s = 2^e with e in [-127, 127], so 1/s is exact and x * (1/s) rounds the same real
      // number as x / s: bit-identical, and cheaper.
      const float inv = 1.0f / e8m0_to_float(code);
      uint8_t* qb = q + (r * cols + b * 32) / 2;
      for (int i = 0; i < 32; i += 2)
        qb[i / 2] = static_cast<uint8_t>(float_to_e2m1(wb[i] * inv) | (float_to_e2m1(wb[i + 1] * inv) << 4));
    }
  }
}

void quantize_int4_group(const float* w, int64_t rows, int64_t cols, int64_t group, int8_t* q,
                         uint16_t* scales_bf16) {
  check_shape(rows, cols);
  if (group <= 0) throw InvalidArgument("group", "> 0", std::to_string(group));
  const int64_t groups = ceil_div(cols, group);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t c0 = g * group, c1 = std::min(cols, c0 + group);
      const float* wr = w + r * cols;
      uint16_t sb = float_to_bf16_bits(amax_of(wr + c0, c1 - c0) / 7.0f);
      if ((sb & 0x7fffu) == 0) sb = 0x3f80;  // zero (or underflowed) scale -> 1.0
      scales_bf16[r * groups + g] = sb;
      const float s = bf16_bits_to_float(sb);
      for (int64_t c = c0; c < c1; ++c) {
        float v = wr[c] / s;
        // Clamp first (same result as clamping after rounding); NaN -> 0.
        v = v > 7.0f ? 7.0f : (v < -8.0f ? -8.0f : (v == v ? v : 0.0f));
        q[r * cols + c] = static_cast<int8_t>(rne_small(v));
      }
    }
  }
}

void w4a8_split_scales(const uint16_t* s_bf16, int64_t rows, int64_t groups, float* c,
                       uint8_t* g) {
  check_shape(rows, groups);
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0.0f;
    for (int64_t j = 0; j < groups; ++j) {
      const float a = std::fabs(bf16_bits_to_float(s_bf16[r * groups + j]));
      amax = a > amax ? a : amax;
    }
    // All-zero row: c = 1 so g = 0 and nobody divides by zero.
    const float cr = amax == 0.0f ? 1.0f : 8.0f * amax / kE4M3Max;
    c[r] = cr;
    for (int64_t j = 0; j < groups; ++j)
      g[r * groups + j] = float_to_e4m3(bf16_bits_to_float(s_bf16[r * groups + j]) / cr);
  }
}

}  // namespace fusedmoe
