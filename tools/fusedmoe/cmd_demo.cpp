// fusedmoe demo: a synthetic layer of a real model's shape, built directly in the chosen format,
// run on random routed tokens, and checked against the float64 oracle on a sample of tokens.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <thread>

#include "args.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "fusedmoe/error.hpp"
#include "fusedmoe/routing.hpp"
#include "presets.hpp"
#include "synth.hpp"

namespace fusedmoe::cli {

const char* const kDemoUsage =
    "usage: fusedmoe demo [--model M] [--format F] [--act-dtype A] [--tokens N] [--backend B]\n"
    "                     [--seed S] [--threads T] [--check-tokens C] [--mxfp4-rounding R]\n"
    "                     [--save-layer L.safetensors] [--save-input I.safetensors] [--quiet]\n"
    "\n"
    "Builds a synthetic expert layer of a real model's shape in format F (random bf16 weights\n"
    "quantised expert by expert, deterministic per seed), routes random tokens (softmax of random\n"
    "logits, top-k, renormalised), runs the layer and compares C sampled output rows with the\n"
    "float64 oracle run on just those tokens. Prints the relative Frobenius error and PASS/FAIL\n"
    "against the format's tolerance (bf16/fp16/fp32 2e-2, fp8-* 6e-2, 4-bit 1.5e-1); exit 3 on FAIL.\n"
    "  --model         mixtral-8x7b | qwen3-30b-a3b (default) | deepseek-v3 | gpt-oss-120b | tiny | tiny-oai\n"
    "  --format        bf16 (default), fp16, fp32, fp8-tensor, fp8-channel, fp8-block, w4a8-int4, mxfp4, nvfp4\n"
    "  --act-dtype     bf16 (default); fp8 for mxfp4, nvfp4 for nvfp4 (static scales calibrated on the\n"
    "                  sampled tokens)\n"
    "  --tokens        number of tokens M (default 32)\n"
    "  --backend       auto (default: cuda when possible, else cpu) | cpu | cuda\n"
    "  --seed          random seed (default 0)\n"
    "  --threads       CPU threads for generation and the CPU backend (default 0 = all cores)\n"
    "  --check-tokens  tokens checked against the oracle (default min(M, 8))\n"
    "  --mxfp4-rounding nvidia (default) | ocp: MXFP4 block-scale exponent rounding\n"
    "  --save-layer, --save-input  also write the layer / input file (docs/LAYER_FILE.md)\n"
    "Refuses when the layer would not fit in MemAvailable host memory.\n";

namespace {

double tolerance(Format f) {
  switch (f) {
    case Format::BF16: case Format::FP16: case Format::FP32: return 2e-2;
    case Format::FP8_TENSOR: case Format::FP8_CHANNEL: case Format::FP8_BLOCK: return 6e-2;
    case Format::W4A8_INT4: case Format::MXFP4: case Format::NVFP4: return 1.5e-1;
  }
  return 0;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Rows `rows` of a [M, ...] tensor, as a new [rows.size(), ...] tensor.
HostTensor take_rows(const HostTensor& t, const std::vector<int64_t>& rows) {
  std::vector<int64_t> shape = t.shape;
  const size_t row_bytes = t.bytes.size() / static_cast<size_t>(shape[0]);
  shape[0] = static_cast<int64_t>(rows.size());
  HostTensor out(t.dtype, shape);
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy_n(t.bytes.begin() + static_cast<std::ptrdiff_t>(rows[i] * row_bytes), row_bytes,
                out.bytes.begin() + static_cast<std::ptrdiff_t>(i * row_bytes));
  return out;
}

}  // namespace

int cmd_demo(const std::vector<std::string>& argv) {
  const Args a("demo", argv,
               {{"model", true}, {"format", true}, {"act-dtype", true}, {"tokens", true}, {"backend", true},
                {"seed", true}, {"threads", true}, {"check-tokens", true}, {"mxfp4-rounding", true},
                {"save-layer", true}, {"save-input", true}, {"quiet", false}});
  if (a.help()) {
    std::fputs(kDemoUsage, stdout);
    return kExitOk;
  }
  const std::string model = a.str("model", "qwen3-30b-a3b");
  const ModelPreset* p = find_preset(model);
  if (!p) throw UsageError("option '--model': '" + model + "' is not one of " + preset_names());
  Format format;
  const std::string fname = a.str("format", "bf16");
  if (!format_from_name(fname, &format))
    throw UsageError("option '--format': '" + fname +
                     "' is not one of bf16, fp16, fp32, fp8-tensor, fp8-channel, fp8-block, w4a8-int4, mxfp4, nvfp4");
  const ActDtype act = parse_act_dtype(format, a.str("act-dtype", "bf16"));
  const int64_t M = a.integer("tokens", 32, 1, int64_t{1} << 24);
  const Backend requested = parse_backend(a.str("backend", "auto"));
  const uint64_t seed = static_cast<uint64_t>(a.integer("seed", 0, 0, INT64_MAX));
  const int threads = static_cast<int>(a.integer("threads", 0, 0, 4096));
  const int64_t S = a.integer("check-tokens", std::min<int64_t>(M, 8), 1, M);
  const bool ocp = a.choice("mxfp4-rounding", "nvidia", {"nvidia", "ocp"}) == "ocp";
  if (a.has("mxfp4-rounding") && format != Format::MXFP4) throw UsageError("option '--mxfp4-rounding' applies to mxfp4 only");
  const bool quiet = a.flag("quiet");

  const int64_t E = p->num_experts, K = p->hidden, N = p->inter, topk = p->topk;
  check_shape_for_format(format, K, N);
  const Backend backend = resolve_backend(requested);
  LayerConfig fc;  // activation options of the float layer; format/act_dtype come from the encoder
  fc.activation = p->activation;
  fc.interleaved = p->interleaved;
  const int64_t R = w13_rows(fc, N);

  // Host memory: the layer, each worker's float expert (and its encoded copy), the batch.
  const int workers = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Plus 10% and 512 MiB of headroom for the process itself and the system.
  const double need = 1.1 * (layer_bytes(format, E, K, N, is_gated(fc.activation), p->bias) +
                             workers * 3.0 * 4.0 * static_cast<double>(R * K + K * N) + M * (K * 12.0 + E * 4.0)) +
                      512.0 * 1024 * 1024;
  const uint64_t avail = mem_available_bytes();
  if (avail > 0 && need > static_cast<double>(avail))
    throw Error("the " + std::string(p->name) + " layer in " + format_name(format) + " needs about " + gib(need) +
                " of host memory (with headroom), but MemAvailable is " + gib(static_cast<double>(avail)) +
                "; try a smaller format, a smaller model or fewer --threads");

  std::printf("model %s (E=%lld top-%lld K=%lld N=%lld %s%s%s), format %s%s, %lld tokens, %s backend\n", p->name,
              static_cast<long long>(E), static_cast<long long>(topk), static_cast<long long>(K),
              static_cast<long long>(N), activation_name(fc.activation), fc.interleaved ? " interleaved" : "",
              p->bias ? " +bias" : "", format_name(format),
              act == ActDtype::BF16 ? "" : (std::string(" act ") + act_dtype_name(act)).c_str(),
              static_cast<long long>(M), backend_name(backend));
  std::fflush(stdout);

  // The batch: bf16 hidden states ~ N(0, 1), routing from random logits.
  InputFile in;
  in.hidden_states = HostTensor(DType::BF16, {M, K});
  std::vector<float> x(static_cast<size_t>(M * K)), logits(static_cast<size_t>(M * E));
  random_normal_bf16(seed, uint64_t{1} << 40, 1.0f, x.data(), M * K);
  random_normal_bf16(seed, (uint64_t{1} << 40) + 1, 1.0f, logits.data(), M * E);
  for (int64_t i = 0; i < M * K; ++i) in.hidden_states.data<uint16_t>()[i] = float_to_bf16_bits(x[i]);
  in.topk_ids = HostTensor(DType::I32, {M, topk});
  in.topk_weights = HostTensor(DType::F32, {M, topk});
  RoutingConfig rc;
  rc.num_experts = E;
  rc.topk = topk;
  route_cpu(rc, logits.data(), M, in.topk_ids.data<int32_t>(), in.topk_weights.data<float>());

  // Sampled tokens, evenly spaced; static activation scales are calibrated on them.
  std::vector<int64_t> sample;
  for (int64_t i = 0; i < S; ++i) sample.push_back(i * M / S);
  const bool calibrate = format == Format::FP8_TENSOR || act == ActDtype::NVFP4;
  std::mutex mu;
  float gemm2_amax = 0.0f;
  ExpertHook hook;
  if (calibrate) {
    hook = [&](int64_t e, const FloatLayer& one) {
      std::vector<float> act_out(static_cast<size_t>(N));
      float amax = 0.0f;
      for (int64_t t : sample)
        for (int64_t k = 0; k < topk; ++k)
          if (in.topk_ids.data<int32_t>()[t * topk + k] == e) {
            expert_activation(one, x.data() + t * K, act_out.data());
            for (float v : act_out) amax = std::max(amax, std::fabs(v));
          }
      std::lock_guard<std::mutex> lock(mu);
      gemm2_amax = std::max(gemm2_amax, amax);
    };
  }

  QuantizeOptions q;
  q.format = format;
  q.act_dtype = act;
  q.mxfp4_rounding = ocp ? Mxfp4ScaleRounding::OCP : Mxfp4ScaleRounding::NVIDIA;
  q.fp8_w13_input_scale = q.fp8_w2_input_scale = 1.0f;  // placeholders, set after calibration
  q.nvfp4_w13_act_amax = q.nvfp4_w2_act_amax = 1.0f;
  const auto t_gen = std::chrono::steady_clock::now();
  Progress progress("generating weights", E, quiet);
  LayerFile layer = build_by_expert(
      fc, E, K, N, q, [&](int64_t e, FloatLayer& one) { random_expert(seed, e, p->bias, one); }, hook, threads,
      progress);
  if (calibrate) {
    // GEMM1's input is known exactly; GEMM2's from the sampled tokens, with headroom for the
    // tokens that were not sampled (values past it saturate, identically in the oracle).
    float x_amax = 0.0f;
    for (float v : x) x_amax = std::max(x_amax, std::fabs(v));
    const float a1 = std::max(x_amax, 1e-6f), a2 = std::max(1.25f * gemm2_amax, 1e-6f);
    auto set_all = [&](const char* name, float v) {
      HostTensor& t = layer.tensors.at(name);
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = v;
    };
    const float div = format == Format::FP8_TENSOR ? 448.0f : 448.0f * 6.0f;
    set_all("w13_input_scale", a1 / div);
    set_all("w2_input_scale", a2 / div);
  }
  const double gen_s = seconds_since(t_gen);
  std::printf("layer: %s in %.1f s\n", gib(layer_bytes(format, E, K, N, is_gated(fc.activation), p->bias)).c_str(), gen_s);
  if (a.has("save-layer")) write_layer_file(a.str("save-layer", ""), layer);
  if (a.has("save-input")) write_input_file(a.str("save-input", ""), in);

  note(quiet, std::string("running on ") + backend_name(backend) + " ...");
  // CUDA: a warm-up run first, the second is timed.
  Backend used = backend;
  const RunResult run =
      execute_with_fallback(layer, in, requested, backend, threads, backend == Backend::CUDA ? 2 : 1, &used);
  std::printf("run: %.3f ms (%lld tokens, %s backend)\n", run.ms, static_cast<long long>(M), backend_name(used));

  note(quiet, "checking " + std::to_string(S) + " tokens against the float64 oracle ...");
  InputFile sub;
  sub.hidden_states = take_rows(in.hidden_states, sample);
  sub.topk_ids = take_rows(in.topk_ids, sample);
  sub.topk_weights = take_rows(in.topk_weights, sample);
  const RunResult oracle = execute(layer, sub, Backend::CPU, threads, CpuPrecision::ORACLE_FP64, 1);
  const double err = rel_frobenius(run.output, sample, oracle.output), tol = tolerance(format);
  const bool pass = err <= tol;
  std::printf("oracle check on %lld tokens: relative Frobenius error %.3e (tolerance %.1e): %s\n",
              static_cast<long long>(S), err, tol, pass ? "PASS" : "FAIL");
  return pass ? kExitOk : kExitCheckFailed;
}

}  // namespace fusedmoe::cli
