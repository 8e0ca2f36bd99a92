// The layer / input / output file contract (docs/LAYER_FILE.md): round trips of every format
// and option, a byte-exact file built by hand, and rejection of everything the contract does
// not describe, with an error that names the key or tensor.
#include <gtest/gtest.h>

#include "io_test_util.hpp"

namespace fusedmoe::test {
namespace {

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

HostTensor noise(DType d, std::vector<int64_t> shape, uint32_t seed) {
  HostTensor t(d, std::move(shape));
  uint32_t s = seed * 2654435761u + 1;
  for (auto& b : t.bytes) b = static_cast<uint8_t>((s = s * 1664525u + 1013904223u) >> 24);
  return t;
}

struct Opts {
  bool bias = false;
  bool input_scales = false;  // fp8-tensor static scales (nvfp4 W4A4 always has them)
};

// The contract's table, written out independently of the library's code.
LayerFile contract_layer(const LayerConfig& c, int64_t E, int64_t K, int64_t N, Opts o = {}) {
  const int64_t R = c.activation == Activation::RELU2 ? N : 2 * N;
  LayerFile lf;
  lf.config = c;
  lf.num_experts = E;
  lf.hidden = K;
  lf.inter = N;
  auto& t = lf.tensors;
  uint32_t seed = 1;
  auto put = [&](const char* name, DType d, std::vector<int64_t> shape) { t[name] = noise(d, std::move(shape), seed++); };
  switch (c.format) {
    case Format::BF16: case Format::FP16: case Format::FP32: {
      const DType d = c.format == Format::BF16 ? DType::BF16 : c.format == Format::FP16 ? DType::F16 : DType::F32;
      put("w13_weight", d, {E, R, K});
      put("w2_weight", d, {E, K, N});
      break;
    }
    case Format::FP8_TENSOR:
      put("w13_weight", DType::F8_E4M3, {E, R, K});
      put("w2_weight", DType::F8_E4M3, {E, K, N});
      put("w13_weight_scale", DType::F32, {E});
      put("w2_weight_scale", DType::F32, {E});
      if (o.input_scales) {
        put("w13_input_scale", DType::F32, {1});
        put("w2_input_scale", DType::F32, {1});
      }
      break;
    case Format::FP8_CHANNEL:
      put("w13_weight", DType::F8_E4M3, {E, R, K});
      put("w2_weight", DType::F8_E4M3, {E, K, N});
      put("w13_weight_scale", DType::F32, {E, R});
      put("w2_weight_scale", DType::F32, {E, K});
      break;
    case Format::FP8_BLOCK:
      put("w13_weight", DType::F8_E4M3, {E, R, K});
      put("w2_weight", DType::F8_E4M3, {E, K, N});
      put("w13_weight_scale", DType::F32, {E, cdiv(R, 128), cdiv(K, 128)});
      put("w2_weight_scale", DType::F32, {E, cdiv(K, 128), cdiv(N, 128)});
      break;
    case Format::W4A8_INT4:
      put("w13_weight", DType::U8, {E, R, K / 2});
      put("w2_weight", DType::U8, {E, K, N / 2});
      put("w13_weight_scale", DType::BF16, {E, R, K / 128});
      put("w2_weight_scale", DType::BF16, {E, K, N / 128});
      break;
    case Format::MXFP4:
      put("w13_weight", DType::U8, {E, R, K / 2});
      put("w2_weight", DType::U8, {E, K, N / 2});
      put("w13_weight_scale", DType::U8, {E, R, K / 32});
      put("w2_weight_scale", DType::U8, {E, K, N / 32});
      break;
    case Format::NVFP4:
      put("w13_weight", DType::U8, {E, R, K / 2});
      put("w2_weight", DType::U8, {E, K, N / 2});
      put("w13_weight_scale", DType::F8_E4M3, {E, R, K / 16});
      put("w2_weight_scale", DType::F8_E4M3, {E, K, N / 16});
      put("w13_weight_scale_2", DType::F32, {E});
      put("w2_weight_scale_2", DType::F32, {E});
      if (c.act_dtype == ActDtype::NVFP4) {
        put("w13_input_scale", DType::F32, {E});
        put("w2_input_scale", DType::F32, {E});
      }
      break;
  }
  if (o.bias) {
    put("w13_bias", DType::F32, {E, R});
    put("w2_bias", DType::F32, {E, K});
  }
  return lf;
}

LayerConfig cfg(Format f, Activation a = Activation::SILU) {
  LayerConfig c;
  c.format = f;
  c.activation = a;
  return c;
}

const Format kFormats[] = {Format::BF16,       Format::FP16,      Format::FP32,
                           Format::FP8_TENSOR, Format::FP8_CHANNEL, Format::FP8_BLOCK,
                           Format::W4A8_INT4,  Format::MXFP4,     Format::NVFP4};

void expect_same(const LayerFile& a, const LayerFile& b) {
  EXPECT_EQ(a.config.format, b.config.format);
  EXPECT_EQ(a.config.activation, b.config.activation);
  EXPECT_EQ(a.config.gate_up_order, b.config.gate_up_order);
  EXPECT_EQ(a.config.interleaved, b.config.interleaved);
  EXPECT_EQ(a.config.swiglu_alpha, b.config.swiglu_alpha);
  EXPECT_EQ(a.config.swiglu_limit, b.config.swiglu_limit);
  EXPECT_EQ(a.config.act_dtype, b.config.act_dtype);
  EXPECT_EQ(b.config.weight_scale_layout, ScaleLayout::LINEAR);
  EXPECT_EQ(a.num_experts, b.num_experts);
  EXPECT_EQ(a.hidden, b.hidden);
  EXPECT_EQ(a.inter, b.inter);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    ASSERT_TRUE(b.tensors.count(name)) << name;
    EXPECT_EQ(t.dtype, b.tensors.at(name).dtype) << name;
    EXPECT_EQ(t.shape, b.tensors.at(name).shape) << name;
    EXPECT_EQ(t.bytes, b.tensors.at(name).bytes) << name;
  }
}

// Every format x activation x option, through memory and through a file.
TEST(LayerFile, RoundTripEveryFormatAndOption) {
  TempDir dir;
  int n = 0;
  for (Format f : kFormats) {
    for (Activation a : {Activation::SILU, Activation::GELU, Activation::GELU_TANH, Activation::RELU2,
                         Activation::SWIGLUOAI}) {
      for (int variant = 0; variant < 4; ++variant) {
        LayerConfig c = cfg(f, a);
        c.gate_up_order = variant & 1 ? GateUpOrder::UP_GATE : GateUpOrder::GATE_UP;
        if (a == Activation::SWIGLUOAI) {
          c.interleaved = variant & 2;
          if (variant == 3) {
            c.swiglu_alpha = 1.5f;
            c.swiglu_limit = 0.1f;
          }
        }
        std::vector<ActDtype> acts = {ActDtype::BF16};
        if (f == Format::MXFP4) acts.push_back(ActDtype::FP8);
        if (f == Format::NVFP4) acts.push_back(ActDtype::NVFP4);
        for (ActDtype ad : acts) {
          c.act_dtype = ad;
          // Small sizes that satisfy every format's blocks; K=N=128 for w4a8's groups, and an
          // fp8-block K that is not a multiple of 128 (ceil dims).
          const int64_t K = f == Format::FP8_BLOCK ? 200 : 128, N = f == Format::FP8_BLOCK ? 96 : 128;
          const LayerFile lf = contract_layer(c, 2, K, N, Opts{variant >= 2, variant == 1});
          SCOPED_TRACE(std::string(format_name(f)) + "/" + activation_name(a) + " variant " + std::to_string(variant) +
                       " act " + act_dtype_name(ad));
          expect_same(lf, layer_from_safetensors(layer_to_safetensors(lf), "mem"));
          const std::string path = dir.file("l" + std::to_string(n++) + ".safetensors");
          write_layer_file(path, lf);
          expect_same(lf, read_layer_file(path));
          // What the writer put in the metadata, and nothing else.
          const auto md = read_safetensors(path).metadata;
          EXPECT_EQ(md.at("format"), format_name(f));
          EXPECT_EQ(md.count("act_dtype"), f == Format::MXFP4 || f == Format::NVFP4 ? 1u : 0u);
          EXPECT_EQ(md.count("swiglu_alpha"), a == Activation::SWIGLUOAI ? 1u : 0u);
        }
      }
    }
  }
  EXPECT_GT(n, 200);
}

TEST(LayerFile, WeightsViewIntoTensors) {
  LayerFile lf = contract_layer(cfg(Format::NVFP4), 2, 32, 32, Opts{true, false});
  const LayerWeights w = lf.weights();
  EXPECT_EQ(w.w13_weight.data, lf.tensors.at("w13_weight").bytes.data());
  EXPECT_EQ(w.w13_weight.shape_str(), "[2,64,16]");
  EXPECT_EQ(w.w2_weight_scale.dtype, DType::F8_E4M3);
  EXPECT_EQ(w.w13_weight_scale_2.shape_str(), "[2]");
  EXPECT_EQ(w.w13_bias.device, DeviceType::CPU);
  EXPECT_FALSE(w.w13_input_scale.present());
}

// A file built byte by byte, as a converter in another language would write it.
TEST(LayerFile, ReadsHandBuiltFile) {
  // E=1, K=2, N=1, relu2 (w13 has N rows), fp32, with a w2 bias; metadata in arbitrary order.
  const std::string header =
      "{\"__metadata__\":{\"activation\":\"relu2\",\"format\":\"fp32\"},"
      "\"w2_bias\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[16,24]},"
      "\"w13_weight\":{\"dtype\":\"F32\",\"shape\":[1,1,2],\"data_offsets\":[0,8]},"
      "\"w2_weight\":{\"dtype\":\"F32\",\"shape\":[1,2,1],\"data_offsets\":[8,16]}}";
  const std::vector<uint8_t> data = {
      0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40,  // w13 = [1, 2]
      0x00, 0x00, 0x40, 0x40, 0x00, 0x00, 0x80, 0xc0,  // w2 = [3, -4]
      0x00, 0x00, 0x00, 0x3f, 0x00, 0x00, 0x00, 0x00,  // w2_bias = [0.5, 0]
  };
  TempDir dir;
  write_bytes(dir.file("h.safetensors"), st_image(header, data));
  const LayerFile lf = read_layer_file(dir.file("h.safetensors"));
  EXPECT_EQ(lf.config.format, Format::FP32);
  EXPECT_EQ(lf.config.activation, Activation::RELU2);
  EXPECT_EQ(lf.config.gate_up_order, GateUpOrder::GATE_UP);
  EXPECT_EQ(lf.num_experts, 1);
  EXPECT_EQ(lf.hidden, 2);
  EXPECT_EQ(lf.inter, 1);
  EXPECT_EQ(lf.tensors.at("w13_weight").data<float>()[1], 2.0f);
  EXPECT_EQ(lf.tensors.at("w2_weight").data<float>()[1], -4.0f);
  EXPECT_EQ(lf.tensors.at("w2_bias").data<float>()[0], 0.5f);
  EXPECT_TRUE(lf.weights().w2_bias.present());
  EXPECT_FALSE(lf.weights().w13_bias.present());
}

// ---- rejections ----

// A valid image of `lf` with the metadata edited (value "" with erase=true removes the key).
Safetensors edited(const LayerFile& lf, const std::map<std::string, std::string>& set,
                   const std::vector<std::string>& erase = {}) {
  Safetensors st = layer_to_safetensors(lf);
  for (const auto& kv : set) st.metadata[kv.first] = kv.second;
  for (const auto& k : erase) st.metadata.erase(k);
  return st;
}

std::string layer_error(const Safetensors& st) {
  try {
    layer_from_safetensors(st, "L");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LayerFile, RejectsBadMetadata) {
  const LayerFile silu = contract_layer(cfg(Format::BF16), 1, 32, 32);
  const LayerFile oai = contract_layer(cfg(Format::BF16, Activation::SWIGLUOAI), 1, 32, 32);
  const LayerFile mx = contract_layer(cfg(Format::MXFP4), 1, 32, 32);
  const LayerFile nv = contract_layer(cfg(Format::NVFP4), 1, 32, 32);
  struct Case {
    const LayerFile* lf;
    std::map<std::string, std::string> set;
    std::vector<std::string> erase;
    const char* needle;
  };
  const Case cases[] = {
      {&silu, {{"colour", "red"}}, {}, "unknown metadata key 'colour'"},
      {&silu, {{"Format", "bf16"}}, {}, "'Format'"},
      {&silu, {}, {"format"}, "missing metadata key 'format'"},
      {&silu, {}, {"activation"}, "missing metadata key 'activation'"},
      {&silu, {{"format", "BF16"}}, {}, "'format'"},
      {&silu, {{"format", "int8"}}, {}, "'format'"},
      {&silu, {{"activation", "swiglu"}}, {}, "'activation'"},
      {&silu, {{"gate_up_order", "gate-up"}}, {}, "'gate_up_order'"},
      {&silu, {{"interleaved", "true"}}, {}, "'interleaved' = true applies only"},
      {&silu, {{"swiglu_alpha", "1.5"}}, {}, "'swiglu_alpha' other than its default applies only"},
      {&silu, {{"swiglu_limit", "8"}}, {}, "'swiglu_limit' other than its default applies only"},
      {&silu, {{"act_dtype", "fp8"}}, {}, "'act_dtype' other than bf16 applies only"},
      {&oai, {{"interleaved", "True"}}, {}, "'interleaved'"},
      {&oai, {{"interleaved", "1"}}, {}, "'interleaved'"},
      {&oai, {{"interleaved", ""}}, {}, "'interleaved'"},
      {&oai, {{"swiglu_alpha", "abc"}}, {}, "'swiglu_alpha'"},
      {&oai, {{"swiglu_alpha", " 1.7"}}, {}, "'swiglu_alpha'"},
      {&oai, {{"swiglu_alpha", "1.7 "}}, {}, "'swiglu_alpha'"},
      {&oai, {{"swiglu_alpha", "1,7"}}, {}, "'swiglu_alpha'"},
      {&oai, {{"swiglu_alpha", "inf"}}, {}, "'swiglu_alpha'"},
      {&oai, {{"swiglu_alpha", "nan"}}, {}, "'swiglu_alpha'"},
      {&oai, {{"swiglu_alpha", "0x1p3"}}, {}, "'swiglu_alpha'"},
      {&oai, {{"swiglu_alpha", "1e999"}}, {}, "'swiglu_alpha'"},
      {&oai, {{"swiglu_alpha", "1e39"}}, {}, "'swiglu_alpha'"},  // finite double, not float
      {&oai, {{"swiglu_alpha", ""}}, {}, "'swiglu_alpha'"},
      {&oai, {{"swiglu_alpha", "."}}, {}, "'swiglu_alpha'"},
      {&oai, {{"swiglu_alpha", "1e"}}, {}, "'swiglu_alpha'"},
      {&oai, {{"swiglu_limit", "0"}}, {}, "'swiglu_limit'"},
      {&oai, {{"swiglu_limit", "-7"}}, {}, "'swiglu_limit'"},
      {&mx, {{"act_dtype", "nvfp4"}}, {}, "'act_dtype'"},
      {&mx, {{"act_dtype", "fp4"}}, {}, "'act_dtype'"},
      {&nv, {{"act_dtype", "fp8"}}, {}, "'act_dtype'"},
  };
  for (const Case& c : cases) {
    const std::string msg = layer_error(edited(*c.lf, c.set, c.erase));
    EXPECT_NE(msg.find(c.needle), std::string::npos) << "wanted '" << c.needle << "', got: " << msg;
  }
  // Values the grammar accepts.
  for (const char* ok : {"1", "-2.5", "+3", ".5", "5.", "1e-3", "2E+2"}) {
    const Safetensors st = edited(oai, {{"swiglu_alpha", ok}});
    EXPECT_EQ(layer_error(st), "") << ok;
  }
  EXPECT_EQ(layer_from_safetensors(edited(oai, {{"swiglu_alpha", "2E+2"}}), "L").config.swiglu_alpha, 200.0f);
  // Defaults when absent.
  const LayerFile d = layer_from_safetensors(edited(oai, {}, {"swiglu_alpha", "swiglu_limit", "interleaved", "gate_up_order"}), "L");
  EXPECT_EQ(d.config.swiglu_alpha, 1.702f);
  EXPECT_EQ(d.config.swiglu_limit, 7.0f);
  EXPECT_FALSE(d.config.interleaved);
  EXPECT_EQ(d.config.gate_up_order, GateUpOrder::GATE_UP);
  EXPECT_EQ(layer_from_safetensors(edited(mx, {}, {"act_dtype"}), "L").config.act_dtype, ActDtype::BF16);
  // A writer that always states the defaults: accepted on layers the keys do not apply to.
  const Safetensors stated = edited(silu, {{"interleaved", "false"}, {"swiglu_alpha", "1.702"},
                                           {"swiglu_limit", "7"}, {"act_dtype", "bf16"}});
  EXPECT_EQ(layer_error(stated), "");
  EXPECT_FALSE(layer_from_safetensors(stated, "L").config.interleaved);
}

// Tensor edits: replace (or add) `name` with this dtype/shape, or remove it.
Safetensors with_tensor(const LayerFile& lf, const std::string& name, DType d, std::vector<int64_t> shape) {
  Safetensors st = layer_to_safetensors(lf);
  st.tensors[name] = noise(d, std::move(shape), 99);
  return st;
}
Safetensors without(const LayerFile& lf, const std::string& name) {
  Safetensors st = layer_to_safetensors(lf);
  st.tensors.erase(name);
  return st;
}

TEST(LayerFile, RejectsBadTensors) {
  const auto bf16 = contract_layer(cfg(Format::BF16), 2, 32, 32);
  const auto relu2 = contract_layer(cfg(Format::FP8_CHANNEL, Activation::RELU2), 2, 32, 32);
  const auto fp8t = contract_layer(cfg(Format::FP8_TENSOR), 2, 32, 32);
  const auto blk = contract_layer(cfg(Format::FP8_BLOCK), 2, 200, 96);
  const auto w4 = contract_layer(cfg(Format::W4A8_INT4), 2, 128, 128);
  const auto mx = contract_layer(cfg(Format::MXFP4), 2, 64, 64);
  LayerConfig nva = cfg(Format::NVFP4);
  nva.act_dtype = ActDtype::NVFP4;
  const auto nv = contract_layer(cfg(Format::NVFP4), 2, 32, 32);
  const auto nv44 = contract_layer(nva, 2, 32, 32);
  struct Case {
    Safetensors st;
    const char* needle;
  };
  const Case cases[] = {
      {with_tensor(bf16, "w3_weight", DType::BF16, {1}), "unknown tensor 'w3_weight'"},
      {with_tensor(bf16, "w13_weight_scale", DType::F32, {2}), "tensor 'w13_weight_scale': not part of a bf16"},
      {with_tensor(bf16, "w13_weight_scale_2", DType::F32, {2}), "'w13_weight_scale_2'"},
      {with_tensor(bf16, "w13_input_scale", DType::F32, {1}), "'w13_input_scale'"},
      {without(bf16, "w2_weight"), "missing tensor 'w2_weight'"},
      {without(bf16, "w13_weight"), "missing tensor 'w13_weight'"},
      {with_tensor(bf16, "w13_weight", DType::F16, {2, 64, 32}), "tensor 'w13_weight': expected dtype BF16"},
      {with_tensor(bf16, "w13_weight", DType::BF16, {2, 64, 33}), "tensor 'w13_weight': expected shape [2,64,32]"},
      {with_tensor(bf16, "w13_weight", DType::BF16, {2, 32, 32}), "'w13_weight'"},  // gated needs 2N rows
      {with_tensor(bf16, "w2_weight", DType::BF16, {2, 32}), "tensor 'w2_weight': expected 3 dimensions"},
      {with_tensor(bf16, "w2_weight", DType::BF16, {0, 32, 32}), "'w2_weight'"},
      {with_tensor(bf16, "w2_weight", DType::BF16, {2, 32, 0}), "'w2_weight'"},
      {with_tensor(bf16, "w13_bias", DType::F32, {2, 32}), "tensor 'w13_bias': expected shape [2,64]"},
      {with_tensor(bf16, "w2_bias", DType::BF16, {2, 32}), "tensor 'w2_bias': expected dtype F32"},
      {with_tensor(relu2, "w13_weight", DType::F8_E4M3, {2, 64, 32}), "'w13_weight'"},  // relu2: N rows
      {with_tensor(relu2, "w13_weight_scale", DType::F32, {2, 64}), "'w13_weight_scale'"},
      {with_tensor(fp8t, "w13_weight_scale", DType::F32, {1}), "'w13_weight_scale'"},
      {with_tensor(fp8t, "w13_input_scale", DType::F32, {2}), "'w13_input_scale'"},
      {with_tensor(fp8t, "w13_input_scale", DType::F32, {}), "'w13_input_scale'"},
      {without(fp8t, "w2_weight_scale"), "missing tensor 'w2_weight_scale'"},
      {with_tensor(blk, "w13_weight_scale", DType::F32, {2, 1, 1}), "expected shape [2,2,2]"},
      {with_tensor(blk, "w2_weight_scale", DType::F32, {2, 1, 1}), "expected shape [2,2,1]"},
      {with_tensor(w4, "w13_weight_scale", DType::F32, {2, 256, 1}), "'w13_weight_scale'"},
      {with_tensor(w4, "w13_weight", DType::I32, {2, 256, 64}), "'w13_weight'"},
      {with_tensor(contract_layer(cfg(Format::W4A8_INT4), 1, 128, 128), "w2_weight", DType::U8, {1, 64, 64}),
       "multiple of 128"},
      {with_tensor(mx, "w2_weight", DType::U8, {2, 64, 8}), "multiple of 32"},
      {with_tensor(mx, "w2_weight", DType::U8, {2, 63, 32}), "even"},
      {with_tensor(mx, "w13_weight_scale", DType::F8_E4M3, {2, 128, 2}), "'w13_weight_scale'"},
      {without(nv, "w13_weight_scale_2"), "missing tensor 'w13_weight_scale_2'"},
      {with_tensor(nv, "w2_weight_scale_2", DType::F32, {1}), "'w2_weight_scale_2'"},
      {with_tensor(nv, "w13_input_scale", DType::F32, {2}), "'w13_input_scale'"},  // act_dtype bf16
      {without(nv44, "w2_input_scale"), "missing tensor 'w2_input_scale'"},
      {with_tensor(nv44, "w2_input_scale", DType::F32, {1}), "'w2_input_scale'"},
      {with_tensor(contract_layer(cfg(Format::FP8_CHANNEL), 1, 32, 32), "w13_input_scale", DType::F32, {1}),
       "'w13_input_scale'"},
  };
  for (const Case& c : cases) {
    const std::string msg = layer_error(c.st);
    EXPECT_NE(msg.find(c.needle), std::string::npos) << "wanted '" << c.needle << "', got: " << msg;
    EXPECT_EQ(msg.rfind("L: ", 0), 0u) << msg;
  }
  // Optional tensors really are optional.
  EXPECT_EQ(layer_error(without(contract_layer(cfg(Format::FP8_TENSOR), 1, 32, 32, Opts{true, true}), "w2_input_scale")), "");
  EXPECT_EQ(layer_error(without(contract_layer(cfg(Format::BF16), 1, 32, 32, Opts{true}), "w13_bias")), "");
}

TEST(LayerFile, WriterRefusesWhatTheFileCannotSay) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  LayerFile lf = contract_layer(cfg(Format::MXFP4), 1, 32, 32);
  lf.config.weight_scale_layout = ScaleLayout::SWIZZLED_128x4;
  EXPECT_ERROR_HAS(write_layer_file(path, lf), "weight_scale_layout");
  lf = contract_layer(cfg(Format::W4A8_INT4), 1, 128, 128);
  lf.config.int4_encoding = Int4Encoding::UINT4B8;
  EXPECT_ERROR_HAS(write_layer_file(path, lf), "int4_encoding");
  lf = contract_layer(cfg(Format::FP8_BLOCK), 1, 128, 128);
  lf.config.fp8_block_ue8m0 = true;
  EXPECT_ERROR_HAS(layer_to_safetensors(lf), "fp8_block_ue8m0");
  lf = contract_layer(cfg(Format::BF16), 1, 32, 32);
  lf.config.interleaved = true;
  EXPECT_ERROR_HAS(write_layer_file(path, lf), "interleaved");
  lf = contract_layer(cfg(Format::BF16), 1, 32, 32);
  lf.config.act_dtype = ActDtype::FP8;
  EXPECT_ERROR_HAS(write_layer_file(path, lf), "act_dtype");
  lf = contract_layer(cfg(Format::BF16), 1, 32, 32);
  lf.inter = 16;
  EXPECT_ERROR_HAS(write_layer_file(path, lf), "disagree");
  lf = contract_layer(cfg(Format::BF16, Activation::SWIGLUOAI), 1, 32, 32);
  lf.config.swiglu_limit = 0.0f;
  EXPECT_ERROR_HAS(write_layer_file(path, lf), "swiglu_limit");
  lf = contract_layer(cfg(Format::BF16), 1, 32, 32);
  lf.tensors["extra"] = HostTensor(DType::F32, {1});
  EXPECT_ERROR_HAS(write_layer_file(path, lf), "'extra'");
  EXPECT_TRUE(dir.entries().empty());  // nothing written, not even a temporary
}

// ---- input and output files ----

InputFile sample_input(DType d, int64_t M, int64_t K, int64_t topk, bool map, bool apply) {
  InputFile in;
  in.hidden_states = noise(d, {M, K}, 1);
  in.topk_ids = noise(DType::I32, {M, topk}, 2);
  in.topk_weights = noise(DType::F32, {M, topk}, 3);
  in.has_expert_map = map;
  if (map) in.expert_map = noise(DType::I32, {16}, 4);
  in.apply_router_weight_on_input = apply;
  return in;
}

void expect_same(const InputFile& a, const InputFile& b) {
  EXPECT_EQ(a.hidden_states.bytes, b.hidden_states.bytes);
  EXPECT_EQ(a.hidden_states.dtype, b.hidden_states.dtype);
  EXPECT_EQ(a.hidden_states.shape, b.hidden_states.shape);
  EXPECT_EQ(a.topk_ids.bytes, b.topk_ids.bytes);
  EXPECT_EQ(a.topk_ids.shape, b.topk_ids.shape);
  EXPECT_EQ(a.topk_weights.bytes, b.topk_weights.bytes);
  EXPECT_EQ(a.has_expert_map, b.has_expert_map);
  EXPECT_EQ(a.expert_map.bytes, b.expert_map.bytes);
  EXPECT_EQ(a.apply_router_weight_on_input, b.apply_router_weight_on_input);
}

TEST(LayerFile, InputRoundTrip) {
  TempDir dir;
  for (DType d : {DType::BF16, DType::F16, DType::F32})
    for (bool map : {false, true})
      for (bool apply : {false, true})
        for (int64_t M : {0, 3}) {
          const InputFile in = sample_input(d, M, 8, 2, map, apply);
          expect_same(in, input_from_safetensors(input_to_safetensors(in), "mem"));
          write_input_file(dir.file("in.safetensors"), in);
          expect_same(in, read_input_file(dir.file("in.safetensors")));
        }
  // A hand-built input file without metadata: the default is false.
  const std::string header =
      "{\"hidden_states\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[0,4]},"
      "\"topk_ids\":{\"dtype\":\"I32\",\"shape\":[1,1],\"data_offsets\":[4,8]},"
      "\"topk_weights\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[8,12]}}";
  const auto img = st_image(header, {0, 0, 0x80, 0x3f, 3, 0, 0, 0, 0, 0, 0, 0x3f});
  const InputFile h = input_from_safetensors(parse_safetensors(img.data(), img.size(), "x"), "x");
  EXPECT_FALSE(h.apply_router_weight_on_input);
  EXPECT_FALSE(h.has_expert_map);
  EXPECT_FALSE(h.expert_map.view().present());
  EXPECT_EQ(h.topk_ids.data<int32_t>()[0], 3);
  EXPECT_EQ(h.topk_weights.data<float>()[0], 0.5f);
}

TEST(LayerFile, InputRejections) {
  auto err = [](const Safetensors& st) {
    try {
      input_from_safetensors(st, "I");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const Safetensors good = input_to_safetensors(sample_input(DType::BF16, 4, 8, 2, true, false));
  auto edit = [&](auto f) {
    Safetensors st = good;
    f(st);
    return err(st);
  };
  EXPECT_EQ(err(good), "");
  EXPECT_NE(edit([](Safetensors& s) { s.metadata["apply_router_weight_on_input"] = "yes"; }).find("apply_router_weight_on_input"), std::string::npos);
  EXPECT_NE(edit([](Safetensors& s) { s.metadata["format"] = "bf16"; }).find("unknown metadata key 'format'"), std::string::npos);
  EXPECT_NE(edit([](Safetensors& s) { s.tensors["w13_weight"] = HostTensor(DType::U8, {1}); }).find("unknown tensor 'w13_weight'"), std::string::npos);
  EXPECT_NE(edit([](Safetensors& s) { s.tensors.erase("hidden_states"); }).find("missing tensor 'hidden_states'"), std::string::npos);
  EXPECT_NE(edit([](Safetensors& s) { s.tensors.erase("topk_ids"); }).find("missing tensor 'topk_ids'"), std::string::npos);
  EXPECT_NE(edit([](Safetensors& s) { s.tensors.erase("topk_weights"); }).find("missing tensor 'topk_weights'"), std::string::npos);
  EXPECT_NE(edit([](Safetensors& s) { s.tensors["hidden_states"] = HostTensor(DType::F8_E4M3, {4, 8}); }).find("'hidden_states'"), std::string::npos);
  EXPECT_NE(edit([](Safetensors& s) { s.tensors["hidden_states"] = HostTensor(DType::BF16, {4, 8, 1}); }).find("'hidden_states'"), std::string::npos);
  EXPECT_NE(edit([](Safetensors& s) { s.tensors["hidden_states"] = HostTensor(DType::BF16, {4, 0}); }).find("'hidden_states'"), std::string::npos);
  EXPECT_NE(edit([](Safetensors& s) { s.tensors["topk_ids"] = HostTensor(DType::I64, {4, 2}); }).find("'topk_ids'"), std::string::npos);
  EXPECT_NE(edit([](Safetensors& s) { s.tensors["topk_ids"] = HostTensor(DType::I32, {3, 2}); }).find("'topk_ids'"), std::string::npos);
  EXPECT_NE(edit([](Safetensors& s) { s.tensors["topk_ids"] = HostTensor(DType::I32, {4, 0}); }).find("'topk_ids'"), std::string::npos);
  EXPECT_NE(edit([](Safetensors& s) { s.tensors["topk_weights"] = HostTensor(DType::F32, {4, 3}); }).find("'topk_weights'"), std::string::npos);
  EXPECT_NE(edit([](Safetensors& s) { s.tensors["topk_weights"] = HostTensor(DType::BF16, {4, 2}); }).find("'topk_weights'"), std::string::npos);
  EXPECT_NE(edit([](Safetensors& s) { s.tensors["expert_map"] = HostTensor(DType::I32, {2, 8}); }).find("'expert_map'"), std::string::npos);
  EXPECT_NE(edit([](Safetensors& s) { s.tensors["expert_map"] = HostTensor(DType::I32, {0}); }).find("'expert_map'"), std::string::npos);
  EXPECT_NE(edit([](Safetensors& s) { s.tensors["expert_map"] = HostTensor(DType::F32, {16}); }).find("'expert_map'"), std::string::npos);
  // The writer refuses what the reader refuses.
  InputFile bad = sample_input(DType::F32, 2, 4, 1, false, false);
  bad.topk_weights = HostTensor(DType::F32, {2, 2});
  EXPECT_ERROR_HAS(input_to_safetensors(bad), "'topk_weights'");
  TempDir dir;
  EXPECT_ERROR_HAS(write_input_file(dir.file("i"), bad), "'topk_weights'");
  EXPECT_TRUE(dir.entries().empty());
}

TEST(LayerFile, OutputFile) {
  TempDir dir;
  const HostTensor out = noise(DType::BF16, {3, 8}, 5);
  write_output_file(dir.file("o.safetensors"), out);
  const Safetensors st = read_safetensors(dir.file("o.safetensors"));
  EXPECT_TRUE(st.metadata.empty());
  ASSERT_EQ(st.tensors.size(), 1u);
  EXPECT_EQ(st.tensors.at("output").bytes, out.bytes);
  EXPECT_EQ(st.tensors.at("output").shape, out.shape);
  EXPECT_ERROR_HAS(write_output_file(dir.file("p"), HostTensor(DType::I32, {3, 8})), "'output'");
  EXPECT_ERROR_HAS(write_output_file(dir.file("p"), HostTensor(DType::F32, {24})), "'output'");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"o.safetensors"});
}

}  // namespace
}  // namespace fusedmoe::test
