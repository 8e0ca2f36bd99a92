#include "common.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "args.hpp"
#include "device.hpp"
#include "fusedmoe/codecs.hpp"
#include "fusedmoe/error.hpp"

namespace fusedmoe::cli {

Backend parse_backend(const std::string& s) {
  if (s == "auto") return Backend::AUTO;
  if (s == "cpu") return Backend::CPU;
  if (s == "cuda") return Backend::CUDA;
  throw UsageError("option '--backend': '" + s + "' is not one of auto, cpu, cuda");
}

Backend resolve_backend(Backend requested) {
  const bool lib = backend_available(Backend::CUDA);
  if (requested == Backend::AUTO) return lib && cuda_device_count() > 0 ? Backend::CUDA : Backend::CPU;
  if (requested == Backend::CUDA) {
    if (!lib) throw Error("--backend cuda: this fusedmoe was built without the CUDA backend");
    if (cuda_device_count() == 0) throw Error("--backend cuda: no CUDA device is visible");
  }
  return requested;
}

RunResult execute(const LayerFile& layer, const InputFile& input, Backend backend, int threads,
                  CpuPrecision precision, int iters) {
  if (backend == Backend::CUDA) return execute_cuda(layer, input, iters);
  Layer l(layer.config, layer.weights(), LayerOptions{Backend::CPU, threads, precision});
  RunResult r;
  r.output = HostTensor(input.hidden_states.dtype, input.hidden_states.shape);
  RunArgs a;
  a.hidden_states = input.hidden_states.view();
  a.topk_ids = input.topk_ids.view();
  a.topk_weights = input.topk_weights.view();
  a.expert_map = input.has_expert_map ? input.expert_map.view() : TensorView{};
  a.output = r.output.view();
  a.apply_router_weight_on_input = input.apply_router_weight_on_input;
  const int64_t M = input.hidden_states.shape[0], topk = input.topk_ids.shape[1];
  std::vector<uint8_t> ws(l.workspace_size(M, topk));  // CPU: host scratch, if it wants any
  a.workspace = ws.empty() ? nullptr : ws.data();
  a.workspace_bytes = ws.size();
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    l.run(a);
    r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  return r;
}

RunResult execute_with_fallback(const LayerFile& layer, const InputFile& input, Backend requested, Backend backend,
                                int threads, int iters, Backend* used) {
  *used = backend;
  try {
    return execute(layer, input, backend, threads, CpuPrecision::FAST, iters);
  } catch (const NotImplemented& e) {
    if (requested != Backend::AUTO || backend != Backend::CUDA) throw;
    std::fprintf(stderr, "note: %s; running on the cpu backend instead\n", e.what());
    *used = Backend::CPU;
    return execute(layer, input, Backend::CPU, threads, CpuPrecision::FAST, 1);
  }
}

void check_shape_for_format(Format f, int64_t K, int64_t N) {
  int64_t blk = 1;
  if (f == Format::W4A8_INT4) blk = kW4A8GroupSize;
  if (f == Format::MXFP4) blk = kMxfp4BlockSize;
  if (f == Format::NVFP4) blk = kNvfp4BlockSize;
  if (K % blk != 0 || N % blk != 0)
    throw Error(std::string("format ") + format_name(f) + " needs the hidden size K and the intermediate size N to be " +
                "multiples of " + std::to_string(blk) + " (K=" + std::to_string(K) + ", N=" + std::to_string(N) + ")");
}

ActDtype parse_act_dtype(Format f, const std::string& s) {
  ActDtype a;
  if (!act_dtype_from_name(s, &a)) throw UsageError("option '--act-dtype': '" + s + "' is not one of bf16, fp8, nvfp4");
  const bool ok = a == ActDtype::BF16 || (a == ActDtype::FP8 && f == Format::MXFP4) ||
                  (a == ActDtype::NVFP4 && f == Format::NVFP4);
  if (!ok)
    throw UsageError(std::string("option '--act-dtype': ") + s + " is not allowed with format " + format_name(f) +
                     " (mxfp4: bf16 or fp8; nvfp4: bf16 or nvfp4; other formats: bf16)");
  return a;
}

void check_input_against_layer(const InputFile& in, const LayerFile& layer, const std::string& what) {
  if (!in.has_expert_map) return;
  const int32_t* m = in.expert_map.data<int32_t>();
  for (int64_t g = 0; g < in.expert_map.numel(); ++g)
    if (m[g] != -1 && (m[g] < 0 || m[g] >= layer.num_experts))
      throw Error(what + ": tensor 'expert_map': entry " + std::to_string(g) + " is " + std::to_string(m[g]) +
                  ", expected -1 or a local expert id in [0, " + std::to_string(layer.num_experts) + ")");
}

double element(const HostTensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::F32: return t.data<float>()[i];
    case DType::BF16: return bf16_bits_to_float(t.data<uint16_t>()[i]);
    case DType::F16: return fp16_bits_to_float(t.data<uint16_t>()[i]);
    default: throw Error(std::string("cannot read elements of dtype ") + dtype_name(t.dtype));
  }
}

double rel_frobenius(const HostTensor& a, const std::vector<int64_t>& rows_a, const HostTensor& ref) {
  const int64_t K = ref.shape[1];
  double num = 0, den = 0;
  for (size_t r = 0; r < rows_a.size(); ++r) {
    for (int64_t k = 0; k < K; ++k) {
      const double x = element(a, rows_a[r] * K + k), y = element(ref, static_cast<int64_t>(r) * K + k);
      if (!std::isfinite(x) || !std::isfinite(y)) return std::numeric_limits<double>::infinity();
      num += (x - y) * (x - y);
      den += y * y;
    }
  }
  if (den == 0) return num == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

uint64_t mem_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream is(line.substr(13));
    uint64_t kb = 0;
    if (is >> kb) return kb * 1024;
  }
  return 0;
}

std::string gib(double bytes) {
  char buf[32];
  if (bytes < 1024.0 * 1024.0 * 1024.0) std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024.0));
  else std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

Progress::Progress(std::string stage, int64_t total, bool quiet)
    : stage_(std::move(stage)), total_(total), quiet_(quiet), last_(std::chrono::steady_clock::now()) {}

void Progress::done_one() {
  const int64_t d = ++done_;
  if (quiet_) return;
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (d <= printed_ || (d != total_ && now - last_ < std::chrono::seconds(1))) return;
  printed_ = d;
  last_ = now;
  std::fprintf(stderr, "%s %lld/%lld\n", stage_.c_str(), static_cast<long long>(d), static_cast<long long>(total_));
}

void note(bool quiet, const std::string& line) {
  if (!quiet) std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace fusedmoe::cli
