// fusedmoe-bench: times fusedmoe::Layer::run() on the CUDA backend over model presets, formats,
// token counts and routing distributions, against ceilings measured in the same run.
// See bench/README.md for the method and the outputs.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "ceilings.hpp"
#include "common.hpp"
#include "devinfo.hpp"
#include "fusedmoe/error.hpp"
#include "gen_host.hpp"
#include "fusedmoe/layer.hpp"
#include "kernels.hpp"
#include "output.hpp"
#include "presets.hpp"
#include "routing.hpp"
#include "timing.hpp"
#include "weights.hpp"

namespace fs = std::filesystem;
using namespace fmbench;
using fusedmoe::DType;
using fusedmoe::Format;
using fusedmoe::TensorView;

namespace {

constexpr const char* kToolVersion = "1";

struct Options {
  std::vector<std::string> presets{"all"};
  std::vector<std::string> shapes;
  std::vector<std::string> formats{"all"};
  std::vector<int64_t> Ms{1, 8, 64, 256, 1024, 4096};
  std::vector<std::string> routings{"uniform"};
  std::string out_dir = "bench-out";
  std::string commit;
  uint64_t seed = 1;
  int warmup = 3, min_reps = 10, max_reps = 200;
  double target_ms = 100;
  double slow_ms = 50;            // a run slower than this makes a "slow point"
  double point_budget_ms = 1500;  // about this much timed work for a slow point
  int64_t graph_max_m = 256;
  int rotate = 4;
  double flush_mb = -1;  // < 0: max(256 MiB, 4 x L2)
  FlushMode flush_mode = FlushMode::kRead;
  int stage_runs = 3;
  bool check = true;
  int check_tokens = 8;
  double check_macs = 2e9;
  double oracle_cache_gb = 16;
  std::string fp8_act_scale = "auto";  // static | dynamic | auto (static, dynamic if refused)
  std::string fp32_rate = "simt";      // simt | tf32
  std::string fp8_rate = "max";        // default | fast | max
  double zipf_s = 1.2;
  double gemm2_input_range = 16;
  bool ceilings = true;
  int gemm_size = 8192;
  int device = 0;
  bool dry_run = false;
  bool self_test = false;
  bool list = false;
  double max_minutes = 0;
  std::map<std::string, double> tol_override;
};

void usage(FILE* f) {
  std::fprintf(f, R"(usage: fusedmoe-bench [options]
Times fusedmoe::Layer::run() (CUDA backend) over presets x formats x routing x M, with ceilings
measured in the same run. Writes fusedmoe-bench.json, fusedmoe-bench.csv and routing/*.npy to --out-dir.

grid
  --preset LIST        presets, comma separated, or all (default) or none; --list shows them
  --shape SPEC         a custom shape (repeatable): name=foo,E=64,topk=6,K=2048,N=1408[,act=silu]
                       [,bias=1][,router_on_input=1][,interleaved=1][,ep=2]   (ep: this rank holds E/ep experts)
  --formats LIST       formats or all (default): every format the build can run (others are skipped
                       with a note): bf16 fp16 fp32 fp8-tensor fp8-channel fp8-block w4a8-int4 mxfp4
                       mxfp4-fp8 nvfp4 nvfp4-w4a4
  --m LIST             token counts (default 1,8,64,256,1024,4096)
  --routing LIST       uniform (default), zipf, one, balanced, or all
  --zipf-s S           Zipf exponent (default 1.2)
method
  --warmup N           untimed runs before timing (default 3)
  --min-reps N, --max-reps N, --target-ms T
                       reps = clamp(T / first timed run, min, max) (defaults 10, 200, 100)
  --slow-ms T, --point-budget-ms B
                       a point whose run takes over T ms (default 50) gets 1 warm-up, max(3, B / run)
                       reps (B default 1500) and 1 stage run
  --graph-max-m M      time M <= this by CUDA-graph replay (default 256; 0 = never)
  --rotate N           input sets rotated between reps (default 4)
  --flush-mb MB        L2 flush buffer passed over before every rep (default max(256, 4 x L2); 0 = off)
  --flush-mode MODE    read (default: loads over the buffer, the L2 left clean) or write (a memset:
                       the L2 left full of dirty lines whose write-backs the timed run then pays)
  --stage-runs N       run_timed() runs for the stage breakdown (default 3; 0 = off)
  --check-tokens N     tokens compared with the CPU float64 oracle per point (default 8)
  --check-macs X       cap on the oracle's multiply-adds per point (default 2e9; fewer tokens if over)
  --oracle-cache-gb X  host memory for experts copied back for the oracle, reused across the points
                       of one (shape, format) (default 16)
  --no-check           skip the oracle comparison (non-finite outputs are still caught)
  --tol FORMAT=X       override a format's tolerance (repeatable)
  --fp8-act-scale S    fp8-tensor activation scales: static, dynamic, auto (default: static, and
                       dynamic where the backend refuses static)
  --gemm2-input-range R  |GEMM2 input| the static activation scales cover (default 16)
  --fp32-rate simt|tf32  which measured rate bounds fp32 points (default simt)
  --fp8-rate default|fast|max  which cuBLASLt fp8 rate bounds fp8 points (default max of both)
  --no-ceilings        do not measure ceilings (no roofline)
  --gemm-size N        m = n = k of the ceiling matmuls (default 8192)
output and run
  --out-dir DIR        (default bench-out)
  --commit STR         recorded commit (default: $FUSEDMOE_COMMIT, $GIT_COMMIT, or unknown)
  --seed N             data and routing seed (default 1)
  --device N           CUDA device (default 0)
  --max-minutes X      stop starting new points after X minutes (they are SKIP; default: no limit)
  --dry-run            no GPU: routing files, FLOP and byte counts only (status DRY)
  --self-test          no GPU: for every format (--formats) on small shapes, weights generated on
                       the host the same way, a full batch run by the CPU backend (fp32) and
                       checked by the sampled float64 oracle as the GPU points are
  --list               print presets, formats and routings
exit status: 0 all points OK or skipped, 1 a point FAILed or hit an ERROR, 2 bad usage.
)");
}

bool parse_double(const std::string& s, double* out) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}
bool parse_int(const std::string& s, int64_t* out) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0') return false;
  *out = v;
  return true;
}

// Returns false on a bad command line (message printed).
bool parse_args(int argc, char** argv, Options* o) {
  auto need = [&](int& i) -> const char* {
    if (i + 1 >= argc) {
      std::fprintf(stderr, "fusedmoe-bench: %s needs a value\n", argv[i]);
      return nullptr;
    }
    return argv[++i];
  };
  auto bad = [&](const char* opt, const std::string& v) {
    std::fprintf(stderr, "fusedmoe-bench: bad value for %s: '%s'\n", opt, v.c_str());
    return false;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = nullptr;
    int64_t n = 0;
    double x = 0;
    if (a == "-h" || a == "--help") {
      usage(stdout);
      std::exit(0);
    } else if (a == "--list") {
      o->list = true;
    } else if (a == "--dry-run") {
      o->dry_run = true;
    } else if (a == "--self-test") {
      o->self_test = true;
    } else if (a == "--no-check") {
      o->check = false;
    } else if (a == "--no-ceilings") {
      o->ceilings = false;
    } else if (a == "--preset" || a == "--presets") {
      if (!(v = need(i))) return false;
      o->presets = split_list(v);
    } else if (a == "--shape") {
      if (!(v = need(i))) return false;
      o->shapes.push_back(v);
    } else if (a == "--formats" || a == "--format") {
      if (!(v = need(i))) return false;
      o->formats = split_list(v);
    } else if (a == "--m" || a == "-m") {
      if (!(v = need(i))) return false;
      o->Ms.clear();
      for (const std::string& s : split_list(v)) {
        if (!parse_int(s, &n) || n < 1) return bad("--m", s);
        o->Ms.push_back(n);
      }
    } else if (a == "--routing") {
      if (!(v = need(i))) return false;
      o->routings = split_list(v);
    } else if (a == "--zipf-s") {
      if (!(v = need(i))) return false;
      if (!parse_double(v, &o->zipf_s) || o->zipf_s <= 0) return bad("--zipf-s", v);
    } else if (a == "--warmup" || a == "--min-reps" || a == "--max-reps" || a == "--rotate" || a == "--stage-runs" ||
               a == "--check-tokens" || a == "--graph-max-m" || a == "--device" || a == "--gemm-size") {
      if (!(v = need(i))) return false;
      if (!parse_int(v, &n) || n < 0) return bad(a.c_str(), v);
      if (a == "--warmup") o->warmup = static_cast<int>(n);
      if (a == "--min-reps") o->min_reps = static_cast<int>(std::max<int64_t>(1, n));
      if (a == "--max-reps") o->max_reps = static_cast<int>(std::max<int64_t>(1, n));
      if (a == "--rotate") o->rotate = static_cast<int>(std::max<int64_t>(1, n));
      if (a == "--stage-runs") o->stage_runs = static_cast<int>(n);
      if (a == "--check-tokens") o->check_tokens = static_cast<int>(std::max<int64_t>(1, n));
      if (a == "--graph-max-m") o->graph_max_m = n;
      if (a == "--device") o->device = static_cast<int>(n);
      if (a == "--gemm-size") o->gemm_size = static_cast<int>(std::max<int64_t>(256, n));
    } else if (a == "--target-ms" || a == "--flush-mb" || a == "--check-macs" || a == "--max-minutes" ||
               a == "--gemm2-input-range" || a == "--oracle-cache-gb" || a == "--slow-ms" || a == "--point-budget-ms") {
      if (!(v = need(i))) return false;
      if (!parse_double(v, &x) || x < 0) return bad(a.c_str(), v);
      if (a == "--target-ms") o->target_ms = x;
      if (a == "--flush-mb") o->flush_mb = x;
      if (a == "--check-macs") o->check_macs = x;
      if (a == "--max-minutes") o->max_minutes = x;
      if (a == "--gemm2-input-range") o->gemm2_input_range = x > 0 ? x : 16;
      if (a == "--oracle-cache-gb") o->oracle_cache_gb = x;
      if (a == "--slow-ms") o->slow_ms = x;
      if (a == "--point-budget-ms") o->point_budget_ms = x;
    } else if (a == "--tol") {
      if (!(v = need(i))) return false;
      const std::string s = v;
      const auto eq = s.find('=');
      if (eq == std::string::npos || !parse_double(s.substr(eq + 1), &x) || x <= 0) return bad("--tol", s);
      o->tol_override[s.substr(0, eq)] = x;
    } else if (a == "--fp8-act-scale") {
      if (!(v = need(i))) return false;
      o->fp8_act_scale = v;
      if (o->fp8_act_scale != "static" && o->fp8_act_scale != "dynamic" && o->fp8_act_scale != "auto")
        return bad("--fp8-act-scale", v);
    } else if (a == "--flush-mode") {
      if (!(v = need(i))) return false;
      if (!parse_flush_mode(v, &o->flush_mode)) return bad("--flush-mode", v);
    } else if (a == "--fp32-rate") {
      if (!(v = need(i))) return false;
      o->fp32_rate = v;
      if (o->fp32_rate != "simt" && o->fp32_rate != "tf32") return bad("--fp32-rate", v);
    } else if (a == "--fp8-rate") {
      if (!(v = need(i))) return false;
      o->fp8_rate = v;
      if (o->fp8_rate != "default" && o->fp8_rate != "fast" && o->fp8_rate != "max") return bad("--fp8-rate", v);
    } else if (a == "--out-dir" || a == "-o") {
      if (!(v = need(i))) return false;
      o->out_dir = v;
    } else if (a == "--commit") {
      if (!(v = need(i))) return false;
      o->commit = v;
    } else if (a == "--seed") {
      if (!(v = need(i))) return false;
      if (!parse_int(v, &n)) return bad("--seed", v);
      o->seed = static_cast<uint64_t>(n);
    } else {
      std::fprintf(stderr, "fusedmoe-bench: unknown option '%s' (--help lists them)\n", a.c_str());
      return false;
    }
  }
  if (o->min_reps > o->max_reps) o->min_reps = o->max_reps;
  return true;
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=.,/:@%") ==
                        std::string::npos)
    return s;
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// ---- host conversions of output values ----
double half_to_double(uint16_t h) {
  const int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(static_cast<double>(mant), -24);
  else if (exp == 31) v = mant ? std::nan("") : INFINITY;
  else v = std::ldexp(static_cast<double>(mant + 1024), exp - 25);
  return sign ? -v : v;
}
double to_double(const uint8_t* p, DType dt, size_t i) {
  switch (dt) {
    case DType::F32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
    case DType::BF16: {
      uint16_t b;
      std::memcpy(&b, p + 2 * i, 2);
      const uint32_t u = static_cast<uint32_t>(b) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    case DType::F16: {
      uint16_t b;
      std::memcpy(&b, p + 2 * i, 2);
      return half_to_double(b);
    }
    default: return std::nan("");
  }
}

// Bytes of one expert's weight tensors (weights, scales, biases, per-expert input scales) and of
// the shared ones, from the layer-file contract. Cross-checked against the generated tensors.
void analytic_weight_bytes(const Shape& s, const FormatVariant& fv, bool fp8_static, double* per_expert, double* shared) {
  const double R = static_cast<double>(s.w13_rows()), K = static_cast<double>(s.K), N = static_cast<double>(s.N);
  const double elems = R * K + K * N;
  auto cdiv = [](double a, double b) { return std::ceil(a / b); };
  double pe = 0, sh = 0;
  switch (fv.format) {
    case Format::BF16: case Format::FP16: pe = 2 * elems; break;
    case Format::FP32: pe = 4 * elems; break;
    case Format::FP8_TENSOR: pe = elems + 8; sh = fp8_static ? 8 : 0; break;
    case Format::FP8_CHANNEL: pe = elems + 4 * R + 4 * K; break;
    case Format::FP8_BLOCK: pe = elems + 4 * cdiv(R, 128) * cdiv(K, 128) + 4 * cdiv(K, 128) * cdiv(N, 128); break;
    case Format::W4A8_INT4: pe = elems / 2 + 2 * R * (K / 128) + 2 * K * (N / 128); break;
    case Format::MXFP4: pe = elems / 2 + R * (K / 32) + K * (N / 32); break;
    case Format::NVFP4:
      pe = elems / 2 + R * (K / 16) + K * (N / 16) + 8 + (fv.act_dtype == fusedmoe::ActDtype::NVFP4 ? 8 : 0);
      break;
  }
  if (s.bias) pe += 4 * R + 4 * K;
  *per_expert = pe;
  *shared = sh;
}

struct RoutingCase {
  RoutingDist dist;
  int64_t M;
  Routing routing;
  SlotCounts counts;
  std::string ids_file, weights_file;
};

class Progress {
 public:
  Progress(int total, bool tty) : total_(total), tty_(tty), t0_(std::chrono::steady_clock::now()) {}
  double elapsed_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }
  void line(int done, const std::string& what) {
    const double el = elapsed_s();
    const double eta = done > 0 ? el / done * (total_ - done) : 0;
    if (tty_) {
      std::fprintf(stderr, "\r\033[K[%d/%d %.0fs eta %.0fs] %s", done, total_, el, eta, what.c_str());
    } else {
      std::fprintf(stderr, "[%d/%d %.0fs eta %.0fs] %s\n", done, total_, el, eta, what.c_str());
    }
    std::fflush(stderr);
  }
  void finish() {
    if (tty_) std::fprintf(stderr, "\n");
  }

 private:
  int total_;
  bool tty_;
  std::chrono::steady_clock::time_point t0_;
};

// Everything a point needs on the device for one (shape, format).
struct GroupState {
  const Shape* shape = nullptr;
  const FormatVariant* fv = nullptr;
  std::unique_ptr<DeviceWeights> dw;
  std::unique_ptr<fusedmoe::Layer> layer;
  DType hdt = DType::BF16;
  std::vector<DeviceBuffer> hidden, out;
  DeviceBuffer ids, wts, emap, workspace, counter;
  size_t workspace_bytes = 0;
  int64_t max_m = 0;
  HostExpertCache cache;  // experts copied back for the oracle
};

fusedmoe::RunArgs make_args(const GroupState& g, int set, int64_t M, cudaStream_t stream) {
  const Shape& s = *g.shape;
  fusedmoe::RunArgs a;
  a.hidden_states = TensorView::contiguous(g.hidden[set].get(), g.hdt, {M, s.K}, fusedmoe::DeviceType::CUDA, 0);
  a.output = TensorView::contiguous(g.out[set].get(), g.hdt, {M, s.K}, fusedmoe::DeviceType::CUDA, 0);
  a.topk_ids = TensorView::contiguous(g.ids.get(), DType::I32, {M, s.topk}, fusedmoe::DeviceType::CUDA, 0);
  a.topk_weights = TensorView::contiguous(g.wts.get(), DType::F32, {M, s.topk}, fusedmoe::DeviceType::CUDA, 0);
  if (s.ep > 1) a.expert_map = TensorView::contiguous(g.emap.get(), DType::I32, {s.E}, fusedmoe::DeviceType::CUDA, 0);
  a.apply_router_weight_on_input = s.router_weight_on_input;
  a.workspace = g.workspace.get();
  a.workspace_bytes = g.workspace_bytes;
  a.stream = stream;
  // Device index of every view: the weights' device.
  for (TensorView* v : {&a.hidden_states, &a.output, &a.topk_ids, &a.topk_weights, &a.expert_map})
    v->device_index = g.dw->weights.w13_weight.device_index;
  return a;
}

// Compares the sampled tokens of the GPU output (output set 0) with the CPU float64 oracle.
// The rows of the layer's input and output: on the GPU, or in host memory (--self-test).
struct RowSource {
  const uint8_t* hidden = nullptr;
  const uint8_t* output = nullptr;
  bool on_device = true;
};

void oracle_check(const DeviceWeights& dw, const Shape& s, DType hdt, const RowSource& src_rows,
                  HostExpertCache* cache, const RoutingCase& rc, const std::vector<int32_t>& expert_map,
                  const Options& opt, Point& p) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t M = rc.M, topk = s.topk, K = s.K;
  const double per_token = static_cast<double>(topk) * static_cast<double>(s.macs_per_slot());
  int64_t S = std::min<int64_t>(M, opt.check_tokens);
  S = std::max<int64_t>(1, std::min<int64_t>(S, static_cast<int64_t>(opt.check_macs / per_token)));
  // Distinct sampled tokens, ascending.
  Rng rng(hash_combine(opt.seed, hash_string(p.preset + p.format + p.routing) + static_cast<uint64_t>(M)));
  std::vector<int64_t> idx(static_cast<size_t>(M));
  for (int64_t i = 0; i < M; ++i) idx[i] = i;
  for (int64_t i = 0; i < S; ++i) std::swap(idx[i], idx[i + static_cast<int64_t>(rng.below(static_cast<uint64_t>(M - i)))]);
  std::vector<int64_t> tokens(idx.begin(), idx.begin() + S);
  std::sort(tokens.begin(), tokens.end());

  // Sub-routing over the distinct local experts the sample hits.
  std::vector<int32_t> experts;
  for (int64_t t : tokens)
    for (int64_t k = 0; k < topk; ++k) {
      const int32_t l = local_expert(rc.routing.ids[t * topk + k], expert_map, s.local_experts());
      if (l >= 0) experts.push_back(l);
    }
  std::sort(experts.begin(), experts.end());
  experts.erase(std::unique(experts.begin(), experts.end()), experts.end());
  std::vector<int32_t> sub_ids(static_cast<size_t>(S * topk));
  std::vector<float> sub_w(static_cast<size_t>(S * topk));
  for (int64_t j = 0; j < S; ++j)
    for (int64_t k = 0; k < topk; ++k) {
      const int64_t src = tokens[j] * topk + k;
      const int32_t l = local_expert(rc.routing.ids[src], expert_map, s.local_experts());
      sub_ids[j * topk + k] =
          l < 0 ? -1 : static_cast<int32_t>(std::lower_bound(experts.begin(), experts.end(), l) - experts.begin());
      sub_w[j * topk + k] = rc.routing.weights[src];
    }

  const size_t ds = fusedmoe::dtype_size(hdt);
  const size_t row = static_cast<size_t>(K) * ds;
  std::vector<uint8_t> x(static_cast<size_t>(S) * row), gpu(static_cast<size_t>(S) * row), ref(static_cast<size_t>(S) * row, 0);
  for (int64_t j = 0; j < S; ++j) {
    const size_t off = static_cast<size_t>(tokens[j]) * row;
    if (src_rows.on_device) {
      FMB_CUDA(cudaMemcpy(x.data() + j * row, src_rows.hidden + off, row, cudaMemcpyDeviceToHost));
      FMB_CUDA(cudaMemcpy(gpu.data() + j * row, src_rows.output + off, row, cudaMemcpyDeviceToHost));
    } else {
      std::memcpy(x.data() + j * row, src_rows.hidden + off, row);
      std::memcpy(gpu.data() + j * row, src_rows.output + off, row);
    }
  }
  if (!experts.empty()) {
    std::unique_ptr<HostWeights> hw = copy_experts_to_host(dw, experts, cache);
    fusedmoe::LayerOptions lo;
    lo.backend = fusedmoe::Backend::CPU;
    lo.cpu_precision = fusedmoe::CpuPrecision::ORACLE_FP64;
    fusedmoe::Layer cpu(dw.config, hw->weights, lo);
    fusedmoe::RunArgs a;
    a.hidden_states = TensorView::contiguous(x.data(), hdt, {S, K});
    a.output = TensorView::contiguous(ref.data(), hdt, {S, K});
    a.topk_ids = TensorView::contiguous(sub_ids.data(), DType::I32, {S, topk});
    a.topk_weights = TensorView::contiguous(sub_w.data(), DType::F32, {S, topk});
    a.apply_router_weight_on_input = s.router_weight_on_input;
    std::vector<uint8_t> ws(cpu.workspace_size(S, topk));
    a.workspace = ws.empty() ? nullptr : ws.data();
    a.workspace_bytes = ws.size();
    cpu.run(a);
  }
  double num = 0, den = 0;
  bool finite = true;
  for (size_t i = 0; i < static_cast<size_t>(S * K); ++i) {
    const double gv = to_double(gpu.data(), hdt, i), rv = to_double(ref.data(), hdt, i);
    if (!std::isfinite(gv)) finite = false;
    num += (gv - rv) * (gv - rv);
    den += rv * rv;
  }
  p.checked = true;
  p.check_tokens = static_cast<int>(S);
  if (!finite) p.rel_err = std::nan("");
  else if (den > 0) p.rel_err = std::sqrt(num / den);
  else p.rel_err = num == 0 ? 0.0 : INFINITY;  // no valid slot: the output must be exactly 0
  p.check_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

fusedmoe::StageTimes median_stages(const std::vector<fusedmoe::StageTimes>& v) {
  auto med = [&](double fusedmoe::StageTimes::*f) {
    std::vector<double> x;
    for (const auto& s : v) x.push_back(s.*f);
    return summarize(x).median;
  };
  fusedmoe::StageTimes r;
  r.permute_ms = med(&fusedmoe::StageTimes::permute_ms);
  r.gemm1_ms = med(&fusedmoe::StageTimes::gemm1_ms);
  r.activation_ms = med(&fusedmoe::StageTimes::activation_ms);
  r.gemm2_ms = med(&fusedmoe::StageTimes::gemm2_ms);
  r.finalize_ms = med(&fusedmoe::StageTimes::finalize_ms);
  r.total_ms = med(&fusedmoe::StageTimes::total_ms);
  return r;
}

// Runs one point: check, then time. Throws on CUDA / library errors (the caller records them).
void run_point(GroupState& g, const RoutingCase& rc, const std::vector<int32_t>& expert_map, const Options& opt,
               cudaStream_t stream, RepTimer& timer, Point& p) {
  const Shape& s = *g.shape;
  const int64_t M = rc.M;
  fusedmoe::Problem pr;
  pr.num_tokens = M;
  pr.hidden = s.K;
  pr.inter = s.N;
  pr.num_experts = s.local_experts();
  pr.num_global_experts = s.E;
  pr.topk = s.topk;
  const fusedmoe::Support sup = g.layer->can_implement(pr);
  if (!sup.ok) {
    p.status = "SKIP";
    p.note = "can_implement: " + sup.reason;
    return;
  }
  FMB_CUDA(cudaMemcpyAsync(g.ids.get(), rc.routing.ids.data(), rc.routing.ids.size() * 4, cudaMemcpyHostToDevice, stream));
  FMB_CUDA(cudaMemcpyAsync(g.wts.get(), rc.routing.weights.data(), rc.routing.weights.size() * 4, cudaMemcpyHostToDevice, stream));
  FMB_CUDA(cudaStreamSynchronize(stream));
  std::vector<fusedmoe::RunArgs> args;
  for (int i = 0; i < opt.rotate; ++i) args.push_back(make_args(g, i, M, stream));

  // 1. Correctness: poison, run, every element finite, sample against the float64 oracle.
  const size_t out_elems = static_cast<size_t>(M * s.K);
  FMB_CUDA(cudaMemsetAsync(g.out[0].get(), 0xff, out_elems * fusedmoe::dtype_size(g.hdt), stream));
  g.layer->run(args[0]);
  FMB_CUDA(cudaGetLastError());
  FMB_CUDA(cudaMemsetAsync(g.counter.get(), 0, sizeof(unsigned long long), stream));
  count_nonfinite(g.out[0].get(), g.hdt, out_elems, g.counter.as<unsigned long long>(), stream);
  unsigned long long nonfinite = 0;
  FMB_CUDA(cudaMemcpyAsync(&nonfinite, g.counter.get(), sizeof(nonfinite), cudaMemcpyDeviceToHost, stream));
  FMB_CUDA(cudaStreamSynchronize(stream));
  p.nonfinite = static_cast<long long>(nonfinite);
  p.tol = g.fv->tolerance();
  if (auto it = opt.tol_override.find(g.fv->name); it != opt.tol_override.end()) p.tol = it->second;
  bool fail = nonfinite > 0;
  std::string fail_note = nonfinite > 0 ? std::to_string(nonfinite) + " non-finite (or unwritten) outputs" : "";
  bool check_error = false;
  if (opt.check) {
    try {
      RowSource rows;
      rows.hidden = g.hidden[0].as<uint8_t>();
      rows.output = g.out[0].as<uint8_t>();
      oracle_check(*g.dw, s, g.hdt, rows, &g.cache, rc, expert_map, opt, p);
    } catch (const CudaError&) {
      throw;
    } catch (const std::exception& e) {  // the oracle could not run: still time the point
      check_error = true;
      fail_note += std::string(fail_note.empty() ? "" : "; ") + "oracle check could not run: " + e.what();
    }
    if (!check_error && !(p.rel_err <= p.tol)) {
      fail = true;
      char b[160];
      std::snprintf(b, sizeof(b), "%srelative error %.3e > tolerance %.1e on %d tokens", fail_note.empty() ? "" : "; ",
                    p.rel_err, p.tol, p.check_tokens);
      fail_note += b;
    }
  }

  // 2. Timing. A slow point (a run over --slow-ms) gets one warm-up, fewer reps (at least 3, about
  // --point-budget-ms of runs) and one stage run, so a slow path cannot eat the grid's time.
  if (opt.warmup > 0) g.layer->run(args[0]);
  FMB_CUDA(cudaStreamSynchronize(stream));
  const std::vector<double> probe = timer.run(1, [&](int) { g.layer->run(args[0]); });
  const double t_est = std::max(1e-4, probe[0]);
  const bool slow = t_est > opt.slow_ms;
  if (!slow) {
    for (int w = 1; w < opt.warmup; ++w) g.layer->run(args[w % opt.rotate]);
    FMB_CUDA(cudaStreamSynchronize(stream));
  }
  int reps = static_cast<int>(std::clamp<double>(std::ceil(opt.target_ms / t_est), opt.min_reps, opt.max_reps));
  if (slow) reps = std::max(3, std::min(reps, static_cast<int>(opt.point_budget_ms / t_est)));
  std::vector<double> times;
  std::string timing_note;
  if (M <= opt.graph_max_m) {
    std::vector<cudaGraphExec_t> execs;
    std::string why;
    for (int i = 0; i < opt.rotate && why.empty(); ++i) {
      cudaGraphExec_t e = capture_graph(stream, [&] { g.layer->run(args[i]); }, &why);
      if (e) execs.push_back(e);
    }
    if (why.empty()) {
      for (cudaGraphExec_t e : execs) FMB_CUDA(cudaGraphLaunch(e, stream));  // upload + warm
      FMB_CUDA(cudaStreamSynchronize(stream));
      times = timer.run(reps, [&](int r) { FMB_CUDA(cudaGraphLaunch(execs[r % execs.size()], stream)); });
      p.timing_method = "graph";
    } else {
      timing_note = "graph capture failed (" + why + "), timed by events";
    }
    for (cudaGraphExec_t e : execs) cudaGraphExecDestroy(e);
  }
  if (times.empty()) {
    times = timer.run(reps, [&](int r) { g.layer->run(args[r % opt.rotate]); });
    p.timing_method = "events";
  }
  p.time_ms = summarize(times);

  // 3. Stage breakdown.
  if (opt.stage_runs > 0) {
    std::vector<fusedmoe::StageTimes> st;
    const int stage_runs = slow ? 1 : opt.stage_runs;
    for (int i = 0; i < stage_runs; ++i) {
      timer.flush();
      st.push_back(g.layer->run_timed(args[i % opt.rotate]));
    }
    p.stages = median_stages(st);
    p.has_stages = true;
    p.stage_runs = stage_runs;
  }
  if (slow) {
    char b[160];
    std::snprintf(b, sizeof(b), "slow point (%.0f ms a run): 1 warm-up, %d reps, 1 stage run", t_est, reps);
    timing_note += (timing_note.empty() ? "" : "; ") + std::string(b);
  }
  p.status = check_error ? "ERROR" : fail ? "FAIL" : "OK";
  std::string note = fail_note;
  if (!timing_note.empty()) note += (note.empty() ? "" : "; ") + timing_note;
  if (!p.note.empty()) note += (note.empty() ? "" : "; ") + p.note;
  p.note = note;
}


// --self-test: the benchmark's own pipeline without a GPU. For each format on a few small shapes
// (gated, swigluoai with biases, relu2, router weight on the input, expert parallel): weights
// generated on the host exactly as on the GPU (same hash and layer-file tensors; Layer's
// validation accepts them or the test fails), a full batch run by the CPU backend in fp32 (the
// stand-in for the GPU), then the same sampled float64 oracle check as a GPU point. Also checks
// the roofline's weight byte count and that outputs are O(1) (scales neither saturate nor vanish).
int self_test(const Options& opt, const std::vector<FormatVariant>& formats) {
  const char* specs[] = {
      "name=st-silu,E=8,topk=2,K=256,N=128",
      "name=st-oss,E=8,topk=4,K=256,N=128,act=swigluoai,bias=1",
      "name=st-relu2,E=8,topk=2,K=256,N=128,act=relu2",
      "name=st-roi,E=4,topk=1,K=256,N=256,router_on_input=1",
      "name=st-ep,E=16,topk=4,K=256,N=128,ep=2",
  };
  const int64_t M = 40;
  int failures = 0, runs = 0;
  std::printf("%-10s %-11s %-8s %4s %9s %9s %8s %s\n", "shape", "format", "routing", "tok", "rel_err", "tol", "out_rms",
              "result");
  for (const char* spec : specs) {
    Shape shape;
    std::string err;
    if (!parse_shape_spec(spec, &shape, &err)) {
      std::fprintf(stderr, "self-test: bad spec %s: %s\n", spec, err.c_str());
      return 1;
    }
    const std::vector<int32_t> emap = make_expert_map(shape.E, shape.ep);
    for (const FormatVariant& fv : formats) {
      for (RoutingDist dist : {RoutingDist::UNIFORM, RoutingDist::ONE}) {
        if (dist == RoutingDist::ONE && shape.name != "st-silu") continue;
        ++runs;
        Point p;
        p.preset = shape.name;
        p.format = fv.name;
        p.routing = routing_name(dist);
        p.tol = fv.tolerance();
        if (auto it = opt.tol_override.find(fv.name); it != opt.tol_override.end()) p.tol = it->second;
        std::string result = "ok";
        double rms = 0;
        try {
          const bool fp8_static = fv.format == Format::FP8_TENSOR && opt.fp8_act_scale != "dynamic";
          WeightGenOptions wo;
          wo.seed = opt.seed;
          wo.host = true;
          wo.gemm2_input_range = static_cast<float>(opt.gemm2_input_range);
          wo.fp8_act_scale = fp8_static ? Fp8ActScale::STATIC : Fp8ActScale::DYNAMIC;
          std::unique_ptr<DeviceWeights> dw = make_device_weights(shape, fv, wo, nullptr);
          double pe = 0, sh = 0;
          analytic_weight_bytes(shape, fv, fp8_static, &pe, &sh);
          if (std::fabs(pe - dw->bytes_per_expert) > 0.5 || std::fabs(sh - dw->shared_bytes) > 0.5)
            throw std::runtime_error("weight byte count: contract " + std::to_string(pe) + " vs generated " +
                                     std::to_string(dw->bytes_per_expert));
          const DType hdt = fv.hidden_dtype();
          const size_t ds = fusedmoe::dtype_size(hdt);
          std::vector<uint8_t> x(static_cast<size_t>(M * shape.K) * ds), y(x.size());
          gen_uniform_host(x.data(), hdt, static_cast<size_t>(M * shape.K), hash_combine(opt.seed, 1000), -1.f, 1.f);
          if (fv.format == Format::FP8_TENSOR && !fp8_static) set_column0_host(x.data(), hdt, M, shape.K, 1.0f);
          RoutingCase rc;
          rc.dist = dist;
          rc.M = M;
          rc.routing = make_routing(dist, M, shape.topk, shape.E, opt.zipf_s, opt.seed);
          fusedmoe::LayerOptions lo;
          lo.backend = fusedmoe::Backend::CPU;
          fusedmoe::Layer layer(dw->config, dw->weights, lo);  // the stand-in for the GPU layer
          fusedmoe::RunArgs a;
          a.hidden_states = TensorView::contiguous(x.data(), hdt, {M, shape.K});
          a.output = TensorView::contiguous(y.data(), hdt, {M, shape.K});
          a.topk_ids = TensorView::contiguous(rc.routing.ids.data(), DType::I32, {M, shape.topk});
          a.topk_weights = TensorView::contiguous(rc.routing.weights.data(), DType::F32, {M, shape.topk});
          std::vector<int32_t> emap_copy = emap;
          if (!emap.empty()) a.expert_map = TensorView::contiguous(emap_copy.data(), DType::I32, {shape.E});
          a.apply_router_weight_on_input = shape.router_weight_on_input;
          std::vector<uint8_t> ws(layer.workspace_size(M, shape.topk));
          a.workspace = ws.empty() ? nullptr : ws.data();
          a.workspace_bytes = ws.size();
          layer.run(a);
          double sum2 = 0;
          for (size_t i = 0; i < static_cast<size_t>(M * shape.K); ++i) {
            const double v = to_double(y.data(), hdt, i);
            sum2 += v * v;
          }
          rms = std::sqrt(sum2 / static_cast<double>(M * shape.K));
          RowSource rows;
          rows.hidden = x.data();
          rows.output = y.data();
          rows.on_device = false;
          HostExpertCache cache;
          cache.cap_bytes = size_t(1) << 30;
          oracle_check(*dw, shape, hdt, rows, &cache, rc, emap, opt, p);
          if (!(p.rel_err <= p.tol)) result = "FAIL (error over tolerance)";
          else if (!(rms > 1e-2 && rms < 1e2)) result = "FAIL (output rms not O(1): data scales are off)";
        } catch (const std::exception& e) {
          result = std::string("FAIL (") + e.what() + ")";
        }
        if (result != "ok") ++failures;
        std::printf("%-10s %-11s %-8s %4d %9.2e %9.1e %8.3f %s\n", shape.name.c_str(), fv.name.c_str(), p.routing.c_str(),
                    p.check_tokens, p.rel_err, p.tol, rms, result.c_str());
      }
    }
  }
  std::printf("%d passed, %d failed\n", runs - failures, failures);
  return failures ? 1 : 0;
}
}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!parse_args(argc, argv, &opt)) {
    usage(stderr);
    return 2;
  }
  const std::vector<Shape> builtin = builtin_presets();
  if (opt.list) {
    std::printf("presets (E, topk, K, N, activation):\n");
    for (const Shape& s : builtin)
      std::printf("  %-20s E=%-4lld topk=%-2lld K=%-5lld N=%-6lld %-9s %s\n", s.name.c_str(), (long long)s.E,
                  (long long)s.topk, (long long)s.K, (long long)s.N, fusedmoe::activation_name(s.activation), s.note.c_str());
    std::printf("formats:");
    for (const FormatVariant& f : all_format_variants()) std::printf(" %s", f.name.c_str());
    std::printf("\nroutings:");
    for (RoutingDist d : all_routings()) std::printf(" %s", routing_name(d));
    std::printf("\n");
    return 0;
  }

  // ---- resolve the grid ----
  std::vector<Shape> shapes;
  for (const std::string& name : opt.presets) {
    if (name == "none") continue;
    if (name == "all") {
      shapes.insert(shapes.end(), builtin.begin(), builtin.end());
      continue;
    }
    auto it = std::find_if(builtin.begin(), builtin.end(), [&](const Shape& s) { return s.name == name; });
    if (it == builtin.end()) {
      std::fprintf(stderr, "fusedmoe-bench: unknown preset '%s' (--list shows them)\n", name.c_str());
      return 2;
    }
    shapes.push_back(*it);
  }
  if (!opt.shapes.empty() && opt.presets == std::vector<std::string>{"all"}) {
    // --shape alone means just the custom shapes.
    bool explicit_presets = false;
    for (int i = 1; i < argc; ++i) explicit_presets |= std::string(argv[i]) == "--preset" || std::string(argv[i]) == "--presets";
    if (!explicit_presets) shapes.clear();
  }
  for (const std::string& spec : opt.shapes) {
    Shape s;
    std::string err;
    if (!parse_shape_spec(spec, &s, &err)) {
      std::fprintf(stderr, "fusedmoe-bench: --shape '%s': %s\n", spec.c_str(), err.c_str());
      return 2;
    }
    shapes.push_back(s);
  }
  std::vector<FormatVariant> formats;
  for (const std::string& name : opt.formats) {
    if (name == "all") {
      const auto all = all_format_variants();
      formats.insert(formats.end(), all.begin(), all.end());
      continue;
    }
    FormatVariant fv;
    if (!find_format_variant(name, &fv)) {
      std::fprintf(stderr, "fusedmoe-bench: unknown format '%s' (--list shows them)\n", name.c_str());
      return 2;
    }
    formats.push_back(fv);
  }
  std::vector<RoutingDist> dists;
  for (const std::string& name : opt.routings) {
    if (name == "all") {
      dists = all_routings();
      break;
    }
    RoutingDist d;
    if (!routing_from_name(name, &d)) {
      std::fprintf(stderr, "fusedmoe-bench: unknown routing '%s' (uniform, zipf, one, balanced, all)\n", name.c_str());
      return 2;
    }
    dists.push_back(d);
  }
  if (opt.self_test) return self_test(opt, formats);
  if (shapes.empty() || formats.empty() || dists.empty() || opt.Ms.empty()) {
    std::fprintf(stderr, "fusedmoe-bench: empty grid\n");
    return 2;
  }
  const int64_t max_m = *std::max_element(opt.Ms.begin(), opt.Ms.end());

  std::error_code ec;
  fs::create_directories(fs::path(opt.out_dir) / "routing", ec);
  if (ec) {
    std::fprintf(stderr, "fusedmoe-bench: cannot create %s: %s\n", opt.out_dir.c_str(), ec.message().c_str());
    return 2;
  }

  RunInfo info;
  info.tool_version = kToolVersion;
  info.commit = !opt.commit.empty() ? opt.commit
                : std::getenv("FUSEDMOE_COMMIT") ? std::getenv("FUSEDMOE_COMMIT")
                : std::getenv("GIT_COMMIT")      ? std::getenv("GIT_COMMIT")
                                                 : "unknown";
  {
    std::string cmd;
    for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + shell_quote(argv[i]);
    info.command = cmd;
  }
  info.date_utc = utc_now();
  info.out_dir = opt.out_dir;
  info.dry_run = opt.dry_run;
  info.fp32_rate_choice = opt.fp32_rate == "tf32" ? "tf32 (cuBLASLt CUBLAS_COMPUTE_32F_FAST_TF32)"
                                                  : "fp32-simt (cuBLASLt CUBLAS_COMPUTE_32F, no TF32)";
  info.fp8_rate_choice = opt.fp8_rate;
  info.fp8_act_scale = opt.fp8_act_scale;
  info.warmup = opt.warmup;
  info.min_reps = opt.min_reps;
  info.max_reps = opt.max_reps;
  info.target_ms = opt.target_ms;
  info.rotate = opt.rotate;
  info.graph_max_m = opt.graph_max_m;
  info.stage_runs = opt.stage_runs;
  info.check_tokens = opt.check ? opt.check_tokens : 0;
  info.check_macs = opt.check_macs;
  info.seed = opt.seed;
  for (const Shape& s : shapes) info.presets_spec.push_back(shape_to_spec(s));

  Progress progress(static_cast<int>(shapes.size() * formats.size() * dists.size() * opt.Ms.size()),
                    isatty(STDERR_FILENO) != 0);

  info.flush_mode = flush_mode_name(opt.flush_mode);
  cudaStream_t stream = nullptr;
  DeviceBuffer flush_buf;
  std::unique_ptr<RepTimer> timer;
  if (!opt.dry_run) {
    try {
      FMB_CUDA(cudaSetDevice(opt.device));
      info.device = query_device(opt.device);
      sample_clocks(info.device, "start");
      FMB_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      size_t flush_bytes = opt.flush_mb < 0 ? std::max<size_t>(size_t(256) << 20, 4 * static_cast<size_t>(info.device.l2_bytes))
                                            : static_cast<size_t>(opt.flush_mb * (1 << 20));
      if (flush_bytes) flush_buf.alloc(flush_bytes);
      info.flush_bytes = flush_bytes;
      timer = std::make_unique<RepTimer>(stream, flush_buf.get(), flush_bytes, std::max(opt.max_reps, 1),
                                         opt.flush_mode);
      std::fprintf(stderr, "fusedmoe-bench: %s, %d SMs, L2 %.0f MB\n", info.device.name.c_str(), info.device.sm_count,
                   info.device.l2_bytes / 1e6);
      if (opt.ceilings) {
        std::fprintf(stderr, "fusedmoe-bench: measuring ceilings (HBM read, copy, cuBLASLt bf16/fp8/fp32)...\n");
        CeilingOptions co;
        co.device_sm_count = info.device.sm_count;
        co.gemm_size = opt.gemm_size;
        co.gemm_size_fp32 = opt.gemm_size;
        info.ceilings = measure_ceilings(co, stream, flush_buf.get(), flush_bytes, opt.flush_mode);
        sample_clocks(info.device, "after ceilings");
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fusedmoe-bench: CUDA setup failed: %s\n", e.what());
      return 1;
    }
  } else {
    info.device.name = "dry-run (no GPU)";
  }
  const Ceilings& C = info.ceilings;
  const double fp8_rate = opt.fp8_rate == "default" ? C.fp8_tflops
                          : opt.fp8_rate == "fast"  ? C.fp8_fast_accum_tflops
                                                    : std::max(C.fp8_tflops, C.fp8_fast_accum_tflops);
  auto rate_of = [&](const FormatVariant& fv, std::string* cls) {
    const std::string rc = fv.rate_class();
    if (rc == "fp8") return *cls = "fp8", fp8_rate;
    if (rc == "fp32") {
      if (opt.fp32_rate == "tf32") return *cls = "tf32", C.tf32_tflops;
      return *cls = "fp32-simt", C.fp32_simt_tflops;
    }
    return *cls = "bf16", C.bf16_tflops;
  };

  std::vector<Point> points;
  const fs::path out(opt.out_dir);
  // Written after every (shape, format) and at the end, so a run stopped from outside (a device
  // time limit) still leaves the points it finished.
  auto write_outputs = [&]() {
    info.wall_s = progress.elapsed_s();
    const fs::path jtmp = out / "fusedmoe-bench.json.tmp", ctmp = out / "fusedmoe-bench.csv.tmp";
    {
      std::ofstream j(jtmp);
      j << json_dump(info, points) << "\n";
      std::ofstream c(ctmp);
      c << csv_dump(points);
      if (!j || !c) {
        std::fprintf(stderr, "fusedmoe-bench: warning: could not write the result files in %s\n", opt.out_dir.c_str());
        return;
      }
    }
    std::error_code e1, e2;
    fs::rename(jtmp, out / "fusedmoe-bench.json", e1);
    fs::rename(ctmp, out / "fusedmoe-bench.csv", e2);
  };
  int done = 0;
  bool context_lost = false;
  const double limit_s = opt.max_minutes > 0 ? opt.max_minutes * 60 : 1e30;

  for (const Shape& shape : shapes) {
    const std::vector<int32_t> expert_map = make_expert_map(shape.E, shape.ep);
    // Routing cases (independent of the format): generated once, written for the peers.
    std::vector<RoutingCase> cases;
    for (RoutingDist d : dists)
      for (int64_t M : opt.Ms) {
        RoutingCase rc;
        rc.dist = d;
        rc.M = M;
        rc.routing = make_routing(d, M, shape.topk, shape.E, opt.zipf_s, opt.seed);
        rc.counts = count_slots(rc.routing, expert_map, shape.local_experts());
        const std::string stem = "routing/" + shape.name + "_" + routing_name(d) + "_M" + std::to_string(M);
        rc.ids_file = stem + "_ids.npy";
        rc.weights_file = stem + "_weights.npy";
        if (!write_npy_i32((fs::path(opt.out_dir) / rc.ids_file).string(), rc.routing.ids.data(), M, shape.topk) ||
            !write_npy_f32((fs::path(opt.out_dir) / rc.weights_file).string(), rc.routing.weights.data(), M, shape.topk))
          std::fprintf(stderr, "fusedmoe-bench: warning: cannot write %s\n", rc.ids_file.c_str());
        cases.push_back(std::move(rc));
      }

    for (const FormatVariant& fv : formats) {
      bool fp8_static = fv.format == Format::FP8_TENSOR && opt.fp8_act_scale != "dynamic";
      // Points of this group, with everything that needs no GPU filled in.
      const size_t first = points.size();
      auto fill = [&]() {
        for (size_t i = first; i < points.size(); ++i) {
          Point& p = points[i];
          double pe = 0, sh = 0;
          analytic_weight_bytes(shape, fv, fp8_static, &pe, &sh);
          p.weight_bytes = pe * static_cast<double>(p.experts_hit) + (p.experts_hit > 0 ? sh : 0);
          p.bytes = p.weight_bytes + p.act_bytes;
        }
      };
      for (const RoutingCase& rc : cases) {
        Point p;
        p.preset = shape.name;
        p.E = shape.E;
        p.E_local = shape.local_experts();
        p.topk = shape.topk;
        p.K = shape.K;
        p.N = shape.N;
        p.ep = shape.ep;
        p.activation = fusedmoe::activation_name(shape.activation);
        p.format = fv.name;
        p.hidden_dtype = fusedmoe::dtype_name(fv.hidden_dtype());
        p.M = rc.M;
        p.routing = routing_name(rc.dist);
        p.routing_file = rc.ids_file;
        p.routing_weights_file = rc.weights_file;
        p.valid_slots = rc.counts.valid_slots;
        p.experts_hit = static_cast<int64_t>(rc.counts.experts_hit.size());
        p.max_tokens_per_expert = rc.counts.max_tokens_per_expert;
        p.flops = 2.0 * static_cast<double>(p.valid_slots) * static_cast<double>(shape.macs_per_slot());
        const double hsize = static_cast<double>(fusedmoe::dtype_size(fv.hidden_dtype()));
        p.act_bytes = 2.0 * static_cast<double>(rc.M * shape.K) * hsize + static_cast<double>(rc.M * shape.topk) * 8.0 +
                      (shape.ep > 1 ? 4.0 * static_cast<double>(shape.E) : 0.0);
        std::string cls;
        rate_of(fv, &cls);
        p.rate_class = cls;
        p.tol = fv.tolerance();
        p.status = opt.dry_run ? "DRY" : "SKIP";
        points.push_back(p);
      }
      fill();
      auto skip_group = [&](const std::string& status, const std::string& note) {
        for (size_t i = first; i < points.size(); ++i) {
          points[i].status = status;
          points[i].note = note;
          std::string cls;
          finish_point(points[i], C.hbm_read_tbps, rate_of(fv, &cls));
          progress.line(++done, shape.name + " " + fv.name + " M=" + std::to_string(points[i].M) + ": " + status);
        }
      };
      if (opt.dry_run) {
        skip_group("DRY", "");
        continue;
      }
      if (context_lost) {
        skip_group("ERROR", "not run: the CUDA context was lost after an earlier kernel fault");
        continue;
      }
      if (progress.elapsed_s() > limit_s) {
        skip_group("SKIP", "not run: --max-minutes reached");
        continue;
      }

      GroupState g;
      g.shape = &shape;
      g.fv = &fv;
      g.hdt = fv.hidden_dtype();
      g.max_m = max_m;
      g.cache.cap_bytes = static_cast<size_t>(opt.oracle_cache_gb * 1e9);
      std::string group_note;
      try {
        progress.line(done, shape.name + " " + fv.name + ": generating weights on the GPU");
        WeightGenOptions wo;
        wo.seed = opt.seed;
        wo.device = opt.device;
        wo.gemm2_input_range = static_cast<float>(opt.gemm2_input_range);
        wo.fp8_act_scale = fp8_static ? Fp8ActScale::STATIC : Fp8ActScale::DYNAMIC;
        g.dw = make_device_weights(shape, fv, wo, stream);
        try {
          g.layer = std::make_unique<fusedmoe::Layer>(g.dw->config, g.dw->weights,
                                                      fusedmoe::LayerOptions{fusedmoe::Backend::CUDA, 0, {}});
        } catch (const fusedmoe::Error& e) {
          if (!(fp8_static && opt.fp8_act_scale == "auto")) throw;
          // The backend refused static activation scales: dynamic per-tensor instead.
          g.layer.reset();
          g.dw.reset();
          fp8_static = false;
          wo.fp8_act_scale = Fp8ActScale::DYNAMIC;
          g.dw = make_device_weights(shape, fv, wo, stream);
          g.layer = std::make_unique<fusedmoe::Layer>(g.dw->config, g.dw->weights,
                                                      fusedmoe::LayerOptions{fusedmoe::Backend::CUDA, 0, {}});
          group_note = std::string("static activation scales refused (") + e.what() + "), dynamic used";
          fill();
        }
        // Cross-check the byte count of the roofline against the tensors actually generated.
        double pe = 0, sh = 0;
        analytic_weight_bytes(shape, fv, fp8_static, &pe, &sh);
        if (std::fabs(pe - g.dw->bytes_per_expert) > 0.5 || std::fabs(sh - g.dw->shared_bytes) > 0.5)
          group_note += (group_note.empty() ? "" : "; ") + std::string("warning: weight byte count mismatch (") +
                        std::to_string(pe) + " vs " + std::to_string(g.dw->bytes_per_expert) + " per expert)";
        const size_t hbytes = static_cast<size_t>(max_m * shape.K) * fusedmoe::dtype_size(g.hdt);
        for (int i = 0; i < opt.rotate; ++i) {
          g.hidden.emplace_back(hbytes);
          g.out.emplace_back(hbytes);
          gen_uniform(g.hidden.back().get(), g.hdt, static_cast<size_t>(max_m * shape.K),
                      hash_combine(opt.seed, 1000 + static_cast<uint64_t>(i)), -1.0f, 1.0f, stream);
          // Dynamic per-tensor scales: every row holds the tensor's amax, so the sampled oracle
          // check sees the same GEMM1 input scale as the full batch.
          if (fv.format == Format::FP8_TENSOR && !fp8_static) set_column0(g.hidden.back().get(), g.hdt, max_m, shape.K, 1.0f, stream);
        }
        g.ids.alloc(static_cast<size_t>(max_m * shape.topk) * 4);
        g.wts.alloc(static_cast<size_t>(max_m * shape.topk) * 4);
        g.counter.alloc(sizeof(unsigned long long));
        if (shape.ep > 1) {
          g.emap.alloc(expert_map.size() * 4);
          FMB_CUDA(cudaMemcpy(g.emap.get(), expert_map.data(), expert_map.size() * 4, cudaMemcpyHostToDevice));
        }
        g.workspace_bytes = g.layer->workspace_size(max_m, shape.topk);
        if (g.workspace_bytes) g.workspace.alloc(g.workspace_bytes);
        FMB_CUDA(cudaStreamSynchronize(stream));
      } catch (const CudaError& e) {
        const bool lost = cuda_context_broken();
        context_lost = context_lost || lost;
        skip_group(e.out_of_memory() ? "SKIP" : "ERROR", std::string(e.out_of_memory() ? "out of GPU memory: " : "") + e.what());
        continue;
      } catch (const fusedmoe::Error& e) {
        skip_group("SKIP", std::string("layer not built: ") + e.what());
        continue;
      } catch (const std::exception& e) {
        skip_group("ERROR", e.what());
        continue;
      }

      for (size_t i = first; i < points.size(); ++i) {
        Point& p = points[i];
        const RoutingCase& rc = cases[i - first];
        if (!group_note.empty()) p.note = group_note;
        if (context_lost) {
          p.status = "ERROR";
          p.note = "not run: the CUDA context was lost after an earlier kernel fault";
        } else if (progress.elapsed_s() > limit_s) {
          p.status = "SKIP";
          p.note = "not run: --max-minutes reached";
        } else {
          try {
            run_point(g, rc, expert_map, opt, stream, *timer, p);
          } catch (const fusedmoe::NotImplemented& e) {  // refused at run time: not supported, not wrong
            p.status = "SKIP";
            p.note = std::string("run: ") + e.what();
            cudaStreamSynchronize(stream);
            cudaGetLastError();
          } catch (const std::exception& e) {
            p.status = "ERROR";
            p.note = e.what();
            if (cuda_context_broken()) context_lost = true;
            // Leave the stream in a usable state for the next point.
            cudaStreamSynchronize(stream);
            cudaGetLastError();
          }
        }
        std::string cls;
        finish_point(p, C.hbm_read_tbps, rate_of(fv, &cls));
        char buf[256];
        if (p.time_ms.n > 0)
          std::snprintf(buf, sizeof(buf), "%s %s %s M=%lld: %.1f us, %.1f%% of roofline, err %.1e %s", p.preset.c_str(),
                        p.format.c_str(), p.routing.c_str(), static_cast<long long>(p.M), p.time_ms.median * 1e3,
                        p.pct_roofline, p.rel_err, p.status.c_str());
        else
          std::snprintf(buf, sizeof(buf), "%s %s %s M=%lld: %s", p.preset.c_str(), p.format.c_str(), p.routing.c_str(),
                        static_cast<long long>(p.M), p.status.c_str());
        progress.line(++done, buf);
      }
      // Free the layer before its weights.
      g.layer.reset();
      g.dw.reset();
      write_outputs();
    }
  }
  progress.finish();
  if (!opt.dry_run) sample_clocks(info.device, "end");
  write_outputs();
  print_table(stdout, info, points);
  std::printf("results: %s, %s\n", (out / "fusedmoe-bench.json").string().c_str(), (out / "fusedmoe-bench.csv").string().c_str());
  if (stream) cudaStreamDestroy(stream);

  bool bad = false;
  for (const Point& p : points) bad = bad || p.status == "FAIL" || p.status == "ERROR";
  return bad ? 1 : 0;
}
