// Writes the fuzzer's seed corpus: small valid layer files of every format and option, input
// and output files, and a few edge cases. Tensor bytes are arbitrary: the readers check dtypes
// and shapes, so the interesting part for the fuzzer is the header.
// Usage: make_seed_corpus DIR
#include <cstdio>
#include <fstream>
#include <string>

#include "fusedmoe/error.hpp"
#include "fusedmoe/layer_file.hpp"

using namespace fusedmoe;

namespace {

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

HostTensor bytes_of(DType d, std::vector<int64_t> shape, uint32_t seed) {
  HostTensor t(d, std::move(shape));
  for (auto& b : t.bytes) b = static_cast<uint8_t>((seed = seed * 1664525u + 1013904223u) >> 24);
  return t;
}

// The smallest sizes each format allows (blocks of 16/32, w4a8 groups of 128).
int64_t min_dim(Format f) {
  switch (f) {
    case Format::W4A8_INT4: return 128;
    case Format::MXFP4: return 32;
    case Format::NVFP4: return 16;
    default: return 4;
  }
}

LayerFile layer(const LayerConfig& c, bool bias, bool input_scales) {
  const int64_t E = 1, K = min_dim(c.format), N = min_dim(c.format);
  const int64_t R = c.activation == Activation::RELU2 ? N : 2 * N;
  LayerFile lf;
  lf.config = c;
  lf.num_experts = E;
  lf.hidden = K;
  lf.inter = N;
  uint32_t seed = 7;
  auto put = [&](const char* n, DType d, std::vector<int64_t> s) { lf.tensors[n] = bytes_of(d, std::move(s), seed++); };
  const bool four = c.format == Format::W4A8_INT4 || c.format == Format::MXFP4 || c.format == Format::NVFP4;
  DType wt = DType::F8_E4M3;
  if (c.format == Format::BF16) wt = DType::BF16;
  if (c.format == Format::FP16) wt = DType::F16;
  if (c.format == Format::FP32) wt = DType::F32;
  if (four) wt = DType::U8;
  put("w13_weight", wt, {E, R, four ? K / 2 : K});
  put("w2_weight", wt, {E, K, four ? N / 2 : N});
  switch (c.format) {
    case Format::FP8_TENSOR:
      put("w13_weight_scale", DType::F32, {E});
      put("w2_weight_scale", DType::F32, {E});
      if (input_scales) {
        put("w13_input_scale", DType::F32, {1});
        put("w2_input_scale", DType::F32, {1});
      }
      break;
    case Format::FP8_CHANNEL:
      put("w13_weight_scale", DType::F32, {E, R});
      put("w2_weight_scale", DType::F32, {E, K});
      break;
    case Format::FP8_BLOCK:
      put("w13_weight_scale", DType::F32, {E, cdiv(R, 128), cdiv(K, 128)});
      put("w2_weight_scale", DType::F32, {E, cdiv(K, 128), cdiv(N, 128)});
      break;
    case Format::W4A8_INT4:
      put("w13_weight_scale", DType::BF16, {E, R, K / 128});
      put("w2_weight_scale", DType::BF16, {E, K, N / 128});
      break;
    case Format::MXFP4:
      put("w13_weight_scale", DType::U8, {E, R, K / 32});
      put("w2_weight_scale", DType::U8, {E, K, N / 32});
      break;
    case Format::NVFP4:
      put("w13_weight_scale", DType::F8_E4M3, {E, R, K / 16});
      put("w2_weight_scale", DType::F8_E4M3, {E, K, N / 16});
      put("w13_weight_scale_2", DType::F32, {E});
      put("w2_weight_scale_2", DType::F32, {E});
      if (c.act_dtype == ActDtype::NVFP4) {
        put("w13_input_scale", DType::F32, {E});
        put("w2_input_scale", DType::F32, {E});
      }
      break;
    default: break;
  }
  if (bias) {
    put("w13_bias", DType::F32, {E, R});
    put("w2_bias", DType::F32, {E, K});
  }
  return lf;
}

void save(const std::string& path, const std::vector<uint8_t>& img) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(img.data()), static_cast<std::streamsize>(img.size()));
  if (!f) throw Error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seed_corpus DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  int n = 0;
  try {
    const Format formats[] = {Format::BF16,      Format::FP16,      Format::FP32,  Format::FP8_TENSOR, Format::FP8_CHANNEL,
                              Format::FP8_BLOCK, Format::W4A8_INT4, Format::MXFP4, Format::NVFP4};
    for (Format f : formats) {
      for (Activation a : {Activation::SILU, Activation::RELU2, Activation::SWIGLUOAI}) {
        LayerConfig c;
        c.format = f;
        c.activation = a;
        if (a == Activation::SWIGLUOAI) {
          c.interleaved = true;
          c.gate_up_order = GateUpOrder::UP_GATE;
        }
        if (f == Format::MXFP4 && a == Activation::SILU) c.act_dtype = ActDtype::FP8;
        if (f == Format::NVFP4 && a == Activation::SILU) c.act_dtype = ActDtype::NVFP4;
        const bool extra = a != Activation::RELU2;
        save(dir + "/layer_" + std::to_string(n++), serialize_safetensors(layer_to_safetensors(layer(c, extra, extra))));
      }
    }
    for (DType d : {DType::BF16, DType::F16, DType::F32}) {
      for (bool map : {false, true}) {
        InputFile in;
        in.hidden_states = bytes_of(d, {3, 4}, 1);
        in.topk_ids = bytes_of(DType::I32, {3, 2}, 2);
        in.topk_weights = bytes_of(DType::F32, {3, 2}, 3);
        in.has_expert_map = map;
        if (map) in.expert_map = bytes_of(DType::I32, {4}, 4);
        in.apply_router_weight_on_input = map;
        save(dir + "/input_" + std::to_string(n++), serialize_safetensors(input_to_safetensors(in)));
      }
    }
    Safetensors out;
    out.tensors["output"] = bytes_of(DType::BF16, {2, 4}, 5);
    save(dir + "/output", serialize_safetensors(out));
    save(dir + "/empty", serialize_safetensors(Safetensors{}));
    Safetensors odd;  // scalar, zero-sized, 5-d and metadata-only shapes
    odd.metadata["format"] = "bf16";
    odd.tensors["s"] = bytes_of(DType::I64, {}, 6);
    odd.tensors["z"] = HostTensor(DType::F8_E5M2, {0, 3});
    odd.tensors["d"] = bytes_of(DType::U8, {1, 1, 1, 1, 2}, 7);
    save(dir + "/odd", serialize_safetensors(odd));
  } catch (const Error& e) {
    std::fprintf(stderr, "make_seed_corpus: %s\n", e.what());
    return 1;
  }
  std::printf("wrote %d seed files to %s\n", n + 3, dir.c_str());
  return 0;
}
