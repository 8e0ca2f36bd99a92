#include "cpu/operand_quant.hpp"

#include <cmath>
#include <vector>

#include "fusedmoe/codecs.hpp"
#include "fusedmoe/quantize.hpp"

namespace fusedmoe::cpu {

template <typename T>
void quantize_operand_row(const OperandQuant& q, const float* in, int64_t cols, int64_t expert, T* out) {
  const LayerConfig& c = *q.config;
  thread_local std::vector<uint8_t> codes;
  thread_local std::vector<float> scales;
  codes.resize(static_cast<size_t>(cols));
  auto fp8_per_row = [&] {
    float s = 0;
    quantize_fp8_per_row(in, 1, cols, codes.data(), &s);
    for (int64_t k = 0; k < cols; ++k) out[k] = T(e4m3_to_float(codes[k])) * T(s);
  };
  switch (c.format) {
    case Format::BF16:
      for (int64_t k = 0; k < cols; ++k) out[k] = T(round_bf16(in[k]));
      return;
    case Format::FP16:
      for (int64_t k = 0; k < cols; ++k) out[k] = T(round_fp16(in[k]));
      return;
    case Format::FP32:
      for (int64_t k = 0; k < cols; ++k) out[k] = T(in[k]);
      return;
    case Format::FP8_TENSOR:
      quantize_fp8_with_scale(in, cols, q.tensor_scale, codes.data());
      for (int64_t k = 0; k < cols; ++k) out[k] = T(e4m3_to_float(codes[k])) * T(q.tensor_scale);
      return;
    case Format::FP8_CHANNEL:
    case Format::W4A8_INT4:
      fp8_per_row();
      return;
    case Format::FP8_BLOCK: {
      const int64_t groups = (cols + kFp8BlockSize - 1) / kFp8BlockSize;
      scales.resize(static_cast<size_t>(groups));
      quantize_fp8_per_token_group(in, 1, cols, kFp8BlockSize, c.fp8_block_ue8m0, codes.data(), scales.data());
      for (int64_t k = 0; k < cols; ++k) out[k] = T(e4m3_to_float(codes[k])) * T(scales[k / kFp8BlockSize]);
      return;
    }
    case Format::MXFP4:
    case Format::NVFP4:
      if (c.act_dtype == ActDtype::FP8) {
        fp8_per_row();
      } else if (c.act_dtype == ActDtype::NVFP4) {
        const float input_scale = q.nvfp4_input_scale[expert];
        const float gs = 1.0f / input_scale;
        const int64_t blocks = cols / kNvfp4BlockSize;
        scales.resize(static_cast<size_t>(blocks));
        std::vector<uint8_t>& sf = codes;  // reuse: packed values go to a second buffer
        thread_local std::vector<uint8_t> packed;
        packed.resize(static_cast<size_t>(cols / 2));
        sf.resize(static_cast<size_t>(blocks));
        quantize_nvfp4(in, 1, cols, gs, packed.data(), sf.data());
        for (int64_t k = 0; k < cols; ++k) {
          const uint8_t nib = (packed[k / 2] >> ((k & 1) * 4)) & 0xF;
          out[k] = T(e2m1_to_float(nib)) * T(e4m3_to_float(sf[k / kNvfp4BlockSize])) / T(gs);
        }
      } else {
        for (int64_t k = 0; k < cols; ++k) out[k] = T(round_bf16(in[k]));
      }
      return;
  }
}

template void quantize_operand_row<float>(const OperandQuant&, const float*, int64_t, int64_t, float*);
template void quantize_operand_row<double>(const OperandQuant&, const float*, int64_t, int64_t, double*);

}  // namespace fusedmoe::cpu
