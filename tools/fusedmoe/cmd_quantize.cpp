// fusedmoe quantize: a bf16/fp16/fp32 layer file -> the same layer in any format of the contract,
// converted expert by expert (the float copy of one expert per worker, never of the layer).
#include <cstdio>
#include <cstring>
#include <utility>

#include "args.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "fusedmoe/codecs.hpp"
#include "fusedmoe/error.hpp"
#include "synth.hpp"

namespace fusedmoe::cli {

const char* const kQuantizeUsage =
    "usage: fusedmoe quantize --layer IN.safetensors --format F --out OUT.safetensors\n"
    "                         [--act-dtype A] [--mxfp4-rounding nvidia|ocp] [--int4-encoding signed]\n"
    "                         [--input-amax A13,A2] [--threads T] [--quiet]\n"
    "\n"
    "Converts a bf16, fp16 or fp32 layer file into format F (bf16, fp16, fp32, fp8-tensor,\n"
    "fp8-channel, fp8-block, w4a8-int4, mxfp4, nvfp4) with the recipes of docs/LAYER_FILE.md.\n"
    "  --act-dtype       bf16 (default); fp8 with mxfp4; nvfp4 with nvfp4 (needs --input-amax)\n"
    "  --mxfp4-rounding  nvidia (default, e = ceil(log2(amax/6))) or ocp (e = floor(log2 amax) - 2)\n"
    "  --int4-encoding   signed (the only encoding layer files hold; uint4b8 is a runtime layout)\n"
    "  --input-amax      calibrated activation amax of GEMM1's and GEMM2's inputs: static scales\n"
    "                    for fp8-tensor (scale = amax/448; optional, dynamic when absent) and the\n"
    "                    global scales of nvfp4 activations (input_scale = amax/2688; required)\n"
    "  --threads         worker threads (default 0 = all cores)\n";

namespace {

// "A,B" -> two positive finite numbers.
std::pair<float, float> parse_amax_pair(const std::string& s) {
  const size_t comma = s.find(',');
  auto num = [&](const std::string& part) {
    Args one("quantize", {"--v", part}, {{"v", true}});
    const double v = one.number("v", 0);
    if (!(v > 0) || v > 3.0e38) throw UsageError("option '--input-amax': '" + part + "' is not a positive number");
    return static_cast<float>(v);
  };
  if (comma == std::string::npos) throw UsageError("option '--input-amax': expected two numbers 'A13,A2', got '" + s + "'");
  return {num(s.substr(0, comma)), num(s.substr(comma + 1))};
}

// Element i of a bf16/fp16/fp32 tensor as float.
float at(const HostTensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::BF16: return bf16_bits_to_float(t.data<uint16_t>()[i]);
    case DType::F16: return fp16_bits_to_float(t.data<uint16_t>()[i]);
    default: return t.data<float>()[i];
  }
}

void copy_expert(const HostTensor& t, int64_t e, int64_t per, std::vector<float>& out) {
  out.resize(static_cast<size_t>(per));
  for (int64_t i = 0; i < per; ++i) out[i] = at(t, e * per + i);
}

}  // namespace

int cmd_quantize(const std::vector<std::string>& argv) {
  const Args a("quantize", argv,
               {{"layer", true}, {"format", true}, {"out", true}, {"act-dtype", true}, {"mxfp4-rounding", true},
                {"int4-encoding", true}, {"input-amax", true}, {"threads", true}, {"quiet", false}});
  if (a.help()) {
    std::fputs(kQuantizeUsage, stdout);
    return kExitOk;
  }
  const std::string in_path = a.required("layer"), out_path = a.required("out"), fname = a.required("format");
  Format format;
  if (!format_from_name(fname, &format))
    throw UsageError("option '--format': '" + fname +
                     "' is not one of bf16, fp16, fp32, fp8-tensor, fp8-channel, fp8-block, w4a8-int4, mxfp4, nvfp4");
  const ActDtype act = parse_act_dtype(format, a.str("act-dtype", "bf16"));
  const bool ocp = a.choice("mxfp4-rounding", "nvidia", {"nvidia", "ocp"}) == "ocp";
  if (a.has("mxfp4-rounding") && format != Format::MXFP4) throw UsageError("option '--mxfp4-rounding' applies to mxfp4 only");
  const std::string enc = a.choice("int4-encoding", "signed", {"signed", "uint4b8"});
  if (a.has("int4-encoding") && format != Format::W4A8_INT4)
    throw UsageError("option '--int4-encoding' applies to w4a8-int4 only");
  if (enc == "uint4b8")
    throw UsageError("option '--int4-encoding': layer files hold signed int4 (docs/LAYER_FILE.md); uint4b8 "
                     "(q + 8) is a runtime layout the library converts to itself");
  const bool w4a4 = format == Format::NVFP4 && act == ActDtype::NVFP4;
  if (a.has("input-amax") && format != Format::FP8_TENSOR && !w4a4)
    throw UsageError("option '--input-amax' applies to fp8-tensor and to nvfp4 with --act-dtype nvfp4 only");
  if (w4a4 && !a.has("input-amax"))
    throw UsageError("nvfp4 with --act-dtype nvfp4 needs --input-amax A13,A2 (the activation global scales)");
  std::pair<float, float> amax{0.0f, 0.0f};
  if (a.has("input-amax")) amax = parse_amax_pair(a.str("input-amax", ""));
  const int threads = static_cast<int>(a.integer("threads", 0, 0, 4096));
  const bool quiet = a.flag("quiet");

  const LayerFile src = read_layer_file(in_path);
  const Format sf = src.config.format;
  if (sf != Format::BF16 && sf != Format::FP16 && sf != Format::FP32)
    throw Error("'" + in_path + "': quantize converts bf16, fp16 or fp32 layer files; this one is " + format_name(sf));
  const int64_t E = src.num_experts, K = src.hidden, N = src.inter, R = w13_rows(src.config, N);
  check_shape_for_format(format, K, N);

  QuantizeOptions q;
  q.format = format;
  q.act_dtype = act;
  q.mxfp4_rounding = ocp ? Mxfp4ScaleRounding::OCP : Mxfp4ScaleRounding::NVIDIA;
  if (a.has("input-amax")) {
    const auto [a13, a2] = amax;
    if (format == Format::FP8_TENSOR) {
      q.fp8_w13_input_scale = a13 / kE4M3Max;
      q.fp8_w2_input_scale = a2 / kE4M3Max;
    } else {
      q.nvfp4_w13_act_amax = a13;
      q.nvfp4_w2_act_amax = a2;
    }
  }
  const auto b13 = src.tensors.find("w13_bias"), b2 = src.tensors.find("w2_bias");
  const ExpertSource source = [&](int64_t e, FloatLayer& one) {
    copy_expert(src.tensors.at("w13_weight"), e, R * K, one.w13);
    copy_expert(src.tensors.at("w2_weight"), e, K * N, one.w2);
    if (b13 != src.tensors.end()) copy_expert(b13->second, e, R, one.w13_bias);
    if (b2 != src.tensors.end()) copy_expert(b2->second, e, K, one.w2_bias);
  };
  Progress progress("quantizing expert", E, quiet);
  const LayerFile out = build_by_expert(src.config, E, K, N, q, source, nullptr, threads, progress);
  write_layer_file(out_path, out);
  std::printf("wrote %s: %s layer E=%lld K=%lld N=%lld (from %s)\n", out_path.c_str(), format_name(format),
              static_cast<long long>(E), static_cast<long long>(K), static_cast<long long>(N), in_path.c_str());
  return kExitOk;
}

}  // namespace fusedmoe::cli
