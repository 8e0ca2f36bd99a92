#include "cpu/weight_rows.hpp"

#include "fusedmoe/codecs.hpp"

namespace fusedmoe::cpu {
namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }
}  // namespace

namespace {
WeightMatrix make(const LayerConfig& c, const TensorView& w, const TensorView& scale, const TensorView& scale_2,
                  int64_t rows, int64_t cols) {
  WeightMatrix m;
  m.format = c.format;
  m.scale_layout = c.weight_scale_layout;
  m.int4_encoding = c.int4_encoding;
  m.data = w.data;
  m.scale = scale.present() ? scale.data : nullptr;
  m.scale_2 = scale_2.present() ? scale_2.ptr<const float>() : nullptr;
  m.rows = rows;
  m.cols = cols;
  return m;
}
}  // namespace

WeightMatrix WeightMatrix::w13(const LayerConfig& c, const LayerWeights& w, int64_t rows, int64_t cols) {
  return make(c, w.w13_weight, w.w13_weight_scale, w.w13_weight_scale_2, rows, cols);
}

WeightMatrix WeightMatrix::w2(const LayerConfig& c, const LayerWeights& w, int64_t rows, int64_t cols) {
  return make(c, w.w2_weight, w.w2_weight_scale, w.w2_weight_scale_2, rows, cols);
}

template <typename T>
void WeightMatrix::dequant_row(int64_t e, int64_t row, T* out) const {
  const int64_t R = rows, C = cols;
  switch (format) {
    case Format::BF16: {
      const uint16_t* p = static_cast<const uint16_t*>(data) + (e * R + row) * C;
      for (int64_t k = 0; k < C; ++k) out[k] = T(bf16_bits_to_float(p[k]));
      return;
    }
    case Format::FP16: {
      const uint16_t* p = static_cast<const uint16_t*>(data) + (e * R + row) * C;
      for (int64_t k = 0; k < C; ++k) out[k] = T(fp16_bits_to_float(p[k]));
      return;
    }
    case Format::FP32: {
      const float* p = static_cast<const float*>(data) + (e * R + row) * C;
      for (int64_t k = 0; k < C; ++k) out[k] = T(p[k]);
      return;
    }
    case Format::FP8_TENSOR:
    case Format::FP8_CHANNEL:
    case Format::FP8_BLOCK: {
      const uint8_t* p = static_cast<const uint8_t*>(data) + (e * R + row) * C;
      const float* s = static_cast<const float*>(scale);
      if (format == Format::FP8_BLOCK) {
        const int64_t kb = ceil_div(C, 128);
        const float* srow = s + (e * ceil_div(R, 128) + row / 128) * kb;
        for (int64_t k = 0; k < C; ++k) out[k] = T(e4m3_to_float(p[k])) * T(srow[k / 128]);
      } else {
        const T sc = T(format == Format::FP8_TENSOR ? s[e] : s[e * R + row]);
        for (int64_t k = 0; k < C; ++k) out[k] = T(e4m3_to_float(p[k])) * sc;
      }
      return;
    }
    case Format::W4A8_INT4: {
      const uint8_t* p = static_cast<const uint8_t*>(data) + (e * R + row) * (C / 2);
      const uint16_t* s = static_cast<const uint16_t*>(scale) + (e * R + row) * (C / kW4A8GroupSize);
      for (int64_t k = 0; k < C; ++k) {
        const uint8_t nib = (p[k / 2] >> ((k & 1) * 4)) & 0xF;
        // signed: two's complement; uint4b8: stored q + 8
        const int q = int4_encoding == Int4Encoding::UINT4B8 ? int(nib) - 8 : (nib >= 8 ? int(nib) - 16 : int(nib));
        out[k] = T(q) * T(bf16_bits_to_float(s[k / kW4A8GroupSize]));
      }
      return;
    }
    case Format::MXFP4:
    case Format::NVFP4: {
      const bool mx = format == Format::MXFP4;
      const int64_t bs = mx ? kMxfp4BlockSize : kNvfp4BlockSize;
      const int64_t scols = C / bs;
      const uint8_t* p = static_cast<const uint8_t*>(data) + (e * R + row) * (C / 2);
      const uint8_t* s = static_cast<const uint8_t*>(scale);
      const T s2 = mx ? T(1) : T(scale_2[e]);
      int64_t expert_scale_bytes = R * scols;
      if (scale_layout == ScaleLayout::SWIZZLED_128x4) expert_scale_bytes = round_up(R, 128) * round_up(scols, 4);
      const uint8_t* se = s + e * expert_scale_bytes;
      for (int64_t b = 0; b < scols; ++b) {
        const uint8_t code = scale_layout == ScaleLayout::LINEAR
                                 ? se[row * scols + b]
                                 : se[swizzled_scale_offset(row, b, scols)];
        const T sf = mx ? T(e8m0_to_float(code)) : T(e4m3_to_float(code)) * s2;
        for (int64_t k = b * bs; k < (b + 1) * bs; ++k) {
          const uint8_t nib = (p[k / 2] >> ((k & 1) * 4)) & 0xF;
          out[k] = T(e2m1_to_float(nib)) * sf;
        }
      }
      return;
    }
  }
}

template void WeightMatrix::dequant_row<float>(int64_t, int64_t, float*) const;
template void WeightMatrix::dequant_row<double>(int64_t, int64_t, double*) const;

}  // namespace fusedmoe::cpu
