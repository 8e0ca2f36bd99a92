// Scalar codecs. Encoders work on the float's bits (rebias + round-to-nearest-even add), so they
// are exact without depending on the FP environment, and only the rare subnormal path branches.
#include "fusedmoe/codecs.hpp"

#include <array>
#include <cmath>
#include <cstring>

namespace fusedmoe {
namespace {

inline uint32_t f2u(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float u2f(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// CUDA's host conversions return this NaN (fp16/fp8 -> float go through fp16's canonical 0x7fff).
constexpr uint32_t kCanonicalNanBits = 0x7fffffffu;

// RNE of a normal float (abs bits `a`) to a format with `mbits` mantissa bits whose exponent
// bias differs from fp32 by `rebias`; carries into the exponent are the correct result.
inline uint32_t round_normal(uint32_t a, uint32_t rebias, int mbits) {
  const int drop = 23 - mbits;
  uint32_t r = a - (rebias << 23);
  r += ((1u << (drop - 1)) - 1u) + ((r >> drop) & 1u);
  return r >> drop;
}

// RNE of a value below the target's min normal, in units of its smallest subnormal 2^-`lsb_exp`:
// result = round(mant24 * 2^(E - 150 + lsb_exp)); E is the float's biased exponent.
inline uint32_t round_subnormal(uint32_t a, int lsb_exp) {
  const int e = static_cast<int>(a >> 23);
  const int shift = 150 - lsb_exp - e;  // >= 1 here
  if (shift > 24) return 0;             // below half the smallest subnormal
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  return q + ((rem > half) | ((rem == half) & (q & 1u)));
}

// Bits of the float value of an fp8 code with `mbits` mantissa bits and exponent `bias`
// (no NaN/Inf handling); constexpr so the decode tables are built at compile time.
constexpr uint32_t fp8_code_bits(uint32_t code, int mbits, int bias) {
  const uint32_t sign = (code & 0x80u) << 24;
  const uint32_t exp = (code & 0x7fu) >> mbits;
  uint32_t man = code & ((1u << mbits) - 1u);
  if (exp != 0) return sign | ((exp + 127u - bias) << 23) | (man << (23 - mbits));
  if (man == 0) return sign;
  // Subnormal: value = man * 2^(1 - bias - mbits); normalise.
  int e = 1 - bias;
  while ((man & (1u << mbits)) == 0) {
    man <<= 1;
    --e;
  }
  man &= (1u << mbits) - 1u;
  return sign | (static_cast<uint32_t>(e + 127) << 23) | (man << (23 - mbits));
}

constexpr std::array<uint32_t, 256> make_e4m3_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t c = 0; c < 256; ++c)
    t[c] = ((c & 0x7fu) == 0x7fu) ? kCanonicalNanBits : fp8_code_bits(c, 3, 7);
  return t;
}
constexpr std::array<uint32_t, 256> make_e5m2_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t c = 0; c < 256; ++c) {
    const uint32_t a = c & 0x7fu;
    if (a > 0x7cu)
      t[c] = kCanonicalNanBits;
    else if (a == 0x7cu)
      t[c] = ((c & 0x80u) << 24) | 0x7f800000u;
    else
      t[c] = fp8_code_bits(c, 2, 15);
  }
  return t;
}
constexpr std::array<uint32_t, 256> kE4M3Bits = make_e4m3_table();
constexpr std::array<uint32_t, 256> kE5M2Bits = make_e5m2_table();

constexpr float kE2M1Values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                   -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

}  // namespace

// ---- 16-bit floats ----
uint16_t float_to_bf16_bits(float x) {
  const uint32_t u = f2u(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;  // CUDA: canonical NaN, sign dropped
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float bf16_bits_to_float(uint16_t b) { return u2f(static_cast<uint32_t>(b) << 16); }

uint16_t float_to_fp16_bits(float x) {
  const uint32_t u = f2u(x);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7fff;                            // canonical NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to Inf
  if (a >= 0x38800000u) return static_cast<uint16_t>(sign | round_normal(a, 112, 10));
  return static_cast<uint16_t>(sign | round_subnormal(a, 24));
}

float fp16_bits_to_float(uint16_t b) {
  const uint32_t sign = (static_cast<uint32_t>(b) & 0x8000u) << 16;
  const uint32_t exp = (b >> 10) & 0x1fu;
  const uint32_t man = b & 0x3ffu;
  if (exp == 0x1fu) return u2f(man ? kCanonicalNanBits : (sign | 0x7f800000u));
  if (exp != 0) return u2f(sign | ((exp + 112u) << 23) | (man << 13));
  // Subnormal or zero: man * 2^-24 is exact in float.
  return u2f(sign | f2u(static_cast<float>(man) * 0x1p-24f));
}

// ---- FP8 ----
uint8_t float_to_e4m3(float x) {
  const uint32_t u = f2u(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x43e80000u) {               // >= 464 (448 + half ulp; the tie rounds to 448), Inf, NaN
    if (a > 0x7f800000u) return 0x7f;   // CUDA: NaN -> 0x7f whatever its sign
    return static_cast<uint8_t>(sign | 0x7eu);
  }
  if (a >= 0x3c800000u) return static_cast<uint8_t>(sign | round_normal(a, 120, 3));  // >= 2^-6
  return static_cast<uint8_t>(sign | round_subnormal(a, 9));
}

float e4m3_to_float(uint8_t b) { return u2f(kE4M3Bits[b]); }

uint8_t float_to_e5m2(float x) {
  const uint32_t u = f2u(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x47700000u) {               // >= 61440 (57344 + half ulp, tie rounds up), Inf, NaN
    if (a > 0x7f800000u) return 0x7f;
    return static_cast<uint8_t>(sign | 0x7bu);
  }
  if (a >= 0x38800000u) return static_cast<uint8_t>(sign | round_normal(a, 112, 2));  // >= 2^-14
  return static_cast<uint8_t>(sign | round_subnormal(a, 16));
}

float e5m2_to_float(uint8_t b) { return u2f(kE5M2Bits[b]); }

// ---- FP4 E2M1 ----
uint8_t float_to_e2m1(float x) {
  const uint32_t u = f2u(x);
  const uint32_t a = u & 0x7fffffffu;
  // The code is the number of RNE decision points at or below |x|; ties go to the even code,
  // hence > at odd->even boundaries and >= at even->odd ones. NaN bits exceed all -> 7.
  const uint32_t code = (a > 0x3e800000u)     // 0.25
                        + (a >= 0x3f400000u)  // 0.75
                        + (a > 0x3fa00000u)   // 1.25
                        + (a >= 0x3fe00000u)  // 1.75
                        + (a > 0x40200000u)   // 2.5
                        + (a >= 0x40600000u)  // 3.5
                        + (a > 0x40a00000u);  // 5
  const uint32_t sign = (a > 0x7f800000u) ? 0u : ((u >> 28) & 0x8u);  // NaN -> +6
  return static_cast<uint8_t>(sign | code);
}

float e2m1_to_float(uint8_t code) { return kE2M1Values[code & 0xfu]; }

void pack_e2m1(const float* x, size_t n, uint8_t* out) {
  for (size_t i = 0; i + 1 < n; i += 2)
    out[i / 2] = static_cast<uint8_t>(float_to_e2m1(x[i]) | (float_to_e2m1(x[i + 1]) << 4));
  if (n & 1) out[n / 2] = float_to_e2m1(x[n - 1]);  // odd tail: high nibble 0
}

void unpack_e2m1(const uint8_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = kE2M1Values[(in[i / 2] >> ((i & 1) * 4)) & 0xfu];
}

// ---- E8M0 ----
float e8m0_to_float(uint8_t code) {
  if (code == 0xff) return u2f(kCanonicalNanBits);
  if (code == 0) return 0x1p-127f;  // the only subnormal code
  return u2f(static_cast<uint32_t>(code) << 23);
}

const char* mxfp4_rounding_name(Mxfp4ScaleRounding r) {
  switch (r) {
    case Mxfp4ScaleRounding::OCP: return "ocp";
    case Mxfp4ScaleRounding::NVIDIA: return "nvidia";
  }
  return "unknown";
}

uint8_t mxfp4_scale_code(float amax, Mxfp4ScaleRounding rounding) {
  amax = std::fabs(amax);
  if (std::isnan(amax)) return 0xff;
  if (amax == 0.0f) return 0;
  if (std::isinf(amax)) return 254;
  // amax = m * 2^ex, m in [0.5, 1): floor(log2 amax) = ex - 1, exactly (frexp handles subnormals).
  int ex = 0;
  const float m = std::frexp(amax, &ex);
  int e;
  if (rounding == Mxfp4ScaleRounding::OCP) {
    e = ex - 3;
  } else {
    // Smallest e with amax <= 6 * 2^e = 0.75 * 2^(e+3).
    e = (m <= 0.75f) ? ex - 3 : ex - 2;
  }
  const int code = e + 127;
  return static_cast<uint8_t>(code < 0 ? 0 : (code > 254 ? 254 : code));
}

float round_up_pow2(float x) {
  if (!(x > 0.0f) || std::isinf(x)) return x;  // zero, negative, NaN, Inf: unchanged
  int ex = 0;
  const float m = std::frexp(x, &ex);
  return std::ldexp(1.0f, m == 0.5f ? ex - 1 : ex);  // 2^128 overflows to Inf, as it should
}

// ---- int4 ----
void pack_int4(const int8_t* q, size_t n, uint8_t* out) {
  for (size_t i = 0; i + 1 < n; i += 2)
    out[i / 2] = static_cast<uint8_t>((q[i] & 0xf) | ((q[i + 1] & 0xf) << 4));
  if (n & 1) out[n / 2] = static_cast<uint8_t>(q[n - 1] & 0xf);
}

void unpack_int4(const uint8_t* in, size_t n, int8_t* out) {
  for (size_t i = 0; i < n; ++i) {
    const int nib = (in[i / 2] >> ((i & 1) * 4)) & 0xf;
    out[i] = static_cast<int8_t>(nib >= 8 ? nib - 16 : nib);
  }
}

void pack_uint4b8(const int8_t* q, size_t n, uint8_t* out) {
  for (size_t i = 0; i + 1 < n; i += 2)
    out[i / 2] = static_cast<uint8_t>(((q[i] + 8) & 0xf) | (((q[i + 1] + 8) & 0xf) << 4));
  if (n & 1) out[n / 2] = static_cast<uint8_t>((q[n - 1] + 8) & 0xf);
}

void unpack_uint4b8(const uint8_t* in, size_t n, int8_t* out) {
  for (size_t i = 0; i < n; ++i)
    out[i] = static_cast<int8_t>(((in[i / 2] >> ((i & 1) * 4)) & 0xf) - 8);
}

// ---- 128x4 swizzle ----
namespace {
inline int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
}  // namespace

size_t swizzled_scale_bytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>(round_up(rows, 128) * round_up(cols, 4));
}

size_t swizzled_scale_offset(int64_t m, int64_t k, int64_t cols) {
  const int64_t kt = round_up(cols, 4) / 4;
  return static_cast<size_t>((m / 128) * (kt * 512) + (k / 4) * 512 + (m % 32) * 16 +
                             ((m % 128) / 32) * 4 + (k % 4));
}

void swizzle_scales_128x4(const uint8_t* flat, int64_t rows, int64_t cols, uint8_t* swizzled) {
  std::memset(swizzled, 0, swizzled_scale_bytes(rows, cols));
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t k = 0; k < cols; ++k) swizzled[swizzled_scale_offset(m, k, cols)] = flat[m * cols + k];
}

void unswizzle_scales_128x4(const uint8_t* swizzled, int64_t rows, int64_t cols, uint8_t* flat) {
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t k = 0; k < cols; ++k) flat[m * cols + k] = swizzled[swizzled_scale_offset(m, k, cols)];
}

}  // namespace fusedmoe
