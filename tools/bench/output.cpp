#include "output.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>
#include <sstream>

namespace fmbench {

using nlohmann::json;

void finish_point(Point& p, double read_tbps, double rate_tflops) {
  if (read_tbps > 0) p.read_tbps = read_tbps;
  if (rate_tflops > 0) p.rate_tflops = rate_tflops;
  const double t = p.time_ms.median;
  if (p.time_ms.n > 0 && t > 0) {
    p.tflops = p.flops / (t * 1e-3) / 1e12;
    p.tbps = p.bytes / (t * 1e-3) / 1e12;
  }
  if (read_tbps > 0 && rate_tflops > 0) {
    const double t_mem = p.bytes / (read_tbps * 1e12) * 1e3;
    const double t_cmp = p.flops / (rate_tflops * 1e12) * 1e3;
    p.roofline_ms = std::max(t_mem, t_cmp);
    p.bound = t_mem >= t_cmp ? "memory" : "compute";
    if (p.time_ms.n > 0 && t > 0) p.pct_roofline = 100.0 * p.roofline_ms / t;
  }
}

namespace {

json num(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

json point_json(const Point& p) {
  json j;
  j["preset"] = p.preset;
  j["E"] = p.E;
  j["E_local"] = p.E_local;
  j["topk"] = p.topk;
  j["K"] = p.K;
  j["N"] = p.N;
  j["ep"] = p.ep;
  j["activation"] = p.activation;
  j["format"] = p.format;
  j["hidden_dtype"] = p.hidden_dtype;
  j["M"] = p.M;
  j["routing"] = p.routing;
  j["routing_file"] = p.routing_file;
  j["routing_weights_file"] = p.routing_weights_file;
  j["status"] = p.status;
  j["note"] = p.note;
  j["valid_slots"] = p.valid_slots;
  j["experts_hit"] = p.experts_hit;
  j["max_tokens_per_expert"] = p.max_tokens_per_expert;
  j["flops"] = p.flops;
  j["weight_bytes"] = p.weight_bytes;
  j["act_bytes"] = p.act_bytes;
  j["bytes"] = p.bytes;
  j["timing_method"] = p.timing_method;
  j["reps"] = p.time_ms.n;
  j["median_ms"] = p.time_ms.n ? num(p.time_ms.median) : json(nullptr);
  j["p10_ms"] = p.time_ms.n ? num(p.time_ms.p10) : json(nullptr);
  j["p90_ms"] = p.time_ms.n ? num(p.time_ms.p90) : json(nullptr);
  j["min_ms"] = p.time_ms.n ? num(p.time_ms.min) : json(nullptr);
  j["max_ms"] = p.time_ms.n ? num(p.time_ms.max) : json(nullptr);
  j["mean_ms"] = p.time_ms.n ? num(p.time_ms.mean) : json(nullptr);
  j["tflops"] = num(p.tflops);
  j["tbps"] = num(p.tbps);
  j["rate_class"] = p.rate_class;
  j["rate_tflops"] = num(p.rate_tflops);
  j["read_tbps"] = num(p.read_tbps);
  j["roofline_ms"] = num(p.roofline_ms);
  j["pct_roofline"] = num(p.pct_roofline);
  j["bound"] = p.bound;
  json c;
  c["checked"] = p.checked;
  c["tokens"] = p.check_tokens;
  c["rel_err"] = num(p.rel_err);
  c["tol"] = num(p.tol);
  c["ms"] = num(p.check_ms);
  c["nonfinite"] = p.nonfinite;
  j["check"] = c;
  if (p.has_stages) {
    json s;
    s["runs"] = p.stage_runs;
    s["permute_ms"] = p.stages.permute_ms;
    s["gemm1_ms"] = p.stages.gemm1_ms;
    s["activation_ms"] = p.stages.activation_ms;
    s["gemm2_ms"] = p.stages.gemm2_ms;
    s["finalize_ms"] = p.stages.finalize_ms;
    s["total_ms"] = p.stages.total_ms;
    j["stages"] = s;
  } else {
    j["stages"] = nullptr;
  }
  return j;
}

std::string fmt(const char* f, double x) {
  if (!std::isfinite(x)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, x);
  return buf;
}

std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) {
    if (c == '"') o += '"';
    o += c;
  }
  return o + "\"";
}

}  // namespace

std::string json_dump(const RunInfo& info, const std::vector<Point>& points) {
  json j;
  j["schema"] = "fusedmoe-bench/1";
  j["tool"] = "fusedmoe-bench";
  j["tool_version"] = info.tool_version;
  j["commit"] = info.commit;
  j["command"] = info.command;
  j["date_utc"] = info.date_utc;
  j["dry_run"] = info.dry_run;
  j["wall_s"] = info.wall_s;
  const DeviceInfo& d = info.device;
  json dev;
  dev["index"] = d.index;
  dev["name"] = d.name;
  dev["pci_bus_id"] = d.pci_bus_id;
  dev["compute_capability"] = std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor);
  dev["sm_count"] = d.sm_count;
  dev["l2_bytes"] = d.l2_bytes;
  dev["mem_bytes"] = d.mem_bytes;
  dev["peak_sm_clock_mhz"] = d.peak_sm_clock_mhz;
  dev["peak_mem_clock_mhz"] = d.peak_mem_clock_mhz;
  dev["mem_bus_width_bits"] = d.mem_bus_width_bits;
  dev["datasheet_bw_tbps"] = d.datasheet_bw_tbps;
  dev["max_sm_clock_mhz"] = d.max_sm_clock_mhz;
  dev["max_mem_clock_mhz"] = d.max_mem_clock_mhz;
  dev["power_limit_w"] = d.power_limit_w;
  dev["driver_version"] = d.driver_version;
  dev["cuda_driver_version"] = d.cuda_driver_version;
  dev["cuda_runtime_version"] = d.cuda_runtime_version;
  dev["nvml"] = d.nvml;
  json clocks = json::array();
  for (const ClockSample& c : d.clocks)
    clocks.push_back({{"when", c.when}, {"sm_mhz", c.sm_mhz}, {"mem_mhz", c.mem_mhz},
                      {"temperature_c", c.temperature_c}, {"power_w", c.power_w}});
  dev["clocks"] = clocks;
  j["device"] = dev;
  const Ceilings& c = info.ceilings;
  json ce;
  ce["measured"] = c.measured;
  auto pos = [](double x) { return x > 0 ? num(x) : json(nullptr); };  // 0 = not measured
  ce["hbm_read_tbps"] = pos(c.hbm_read_tbps);
  ce["hbm_read_config"] = c.hbm_read_config;
  ce["copy_tbps"] = pos(c.copy_tbps);
  ce["bf16_tflops"] = pos(c.bf16_tflops);
  ce["fp8_tflops"] = pos(c.fp8_tflops);
  ce["fp8_fast_accum_tflops"] = pos(c.fp8_fast_accum_tflops);
  ce["fp32_simt_tflops"] = pos(c.fp32_simt_tflops);
  ce["tf32_tflops"] = pos(c.tf32_tflops);
  ce["fp32_rate_used"] = info.fp32_rate_choice;
  ce["fp8_rate_used"] = info.fp8_rate_choice;
  ce["errors"] = c.errors;
  ce["method"] =
      "read: a read-only kernel of 16-byte streaming loads over a multi-GB buffer, best of several launch shapes; "
      "copy: cudaMemcpyAsync device to device, bytes read + written; matmul: cuBLASLt, m=n=k, TN, random operands, "
      "fp32 accumulation, bf16 output (fp32 for fp32/tf32), e4m3 with fp32 scale pointers; median of reps";
  j["ceilings"] = ce;
  json m;
  m["warmup"] = info.warmup;
  m["min_reps"] = info.min_reps;
  m["max_reps"] = info.max_reps;
  m["target_ms"] = info.target_ms;
  m["rotate"] = info.rotate;
  m["graph_max_m"] = info.graph_max_m;
  m["flush_bytes"] = info.flush_bytes;
  m["flush_mode"] = info.flush_mode;
  m["stage_runs"] = info.stage_runs;
  m["check_tokens"] = info.check_tokens;
  m["check_macs"] = info.check_macs;
  m["seed"] = info.seed;
  m["fp8_act_scale"] = info.fp8_act_scale;
  m["description"] =
      "per rep: L2 flush (a pass over a buffer > L2, not timed: flush_mode read = loads, the L2 left clean; "
      "write = a memset, the L2 left dirty), event, run() (a CUDA graph of one run() for "
      "M <= graph_max_m, rotating over `rotate` input sets; direct call otherwise), event; median and p10/p90 over "
      "reps. Before timing, the output is poisoned, checked for non-finite values and compared on a token sample "
      "with the CPU float64 oracle (Backend::CPU, ORACLE_FP64, same routing, experts copied back). FLOPs = 2 * valid "
      "slots * (R*K + K*N); bytes = weights (+ scales, biases) of the distinct local experts hit + hidden in + "
      "output + topk ids and weights; roofline = max(bytes / read bandwidth, FLOPs / matmul rate of the format).";
  j["method"] = m;
  j["shapes"] = info.presets_spec;
  json pts = json::array();
  for (const Point& p : points) pts.push_back(point_json(p));
  j["points"] = pts;
  return j.dump(1);
}

std::string csv_dump(const std::vector<Point>& points) {
  std::ostringstream os;
  os << "preset,E,E_local,topk,K,N,ep,activation,format,hidden_dtype,M,routing,status,valid_slots,experts_hit,"
        "flops,weight_bytes,act_bytes,bytes,timing_method,reps,median_ms,p10_ms,p90_ms,min_ms,tflops,tbps,rate_class,"
        "rate_tflops,read_tbps,roofline_ms,pct_roofline,bound,check_tokens,rel_err,tol,nonfinite,permute_ms,gemm1_ms,"
        "activation_ms,gemm2_ms,finalize_ms,stages_total_ms,routing_file,note\n";
  auto n = [](double x) {
    if (!std::isfinite(x)) return std::string();
    char b[40];
    std::snprintf(b, sizeof(b), "%.9g", x);
    return std::string(b);
  };
  for (const Point& p : points) {
    const bool t = p.time_ms.n > 0;
    os << p.preset << ',' << p.E << ',' << p.E_local << ',' << p.topk << ',' << p.K << ',' << p.N << ',' << p.ep << ','
       << p.activation << ',' << p.format << ',' << p.hidden_dtype << ',' << p.M << ',' << p.routing << ',' << p.status
       << ',' << p.valid_slots << ',' << p.experts_hit << ',' << n(p.flops) << ',' << n(p.weight_bytes) << ','
       << n(p.act_bytes) << ',' << n(p.bytes) << ',' << p.timing_method << ',' << p.time_ms.n << ','
       << (t ? n(p.time_ms.median) : "") << ',' << (t ? n(p.time_ms.p10) : "") << ',' << (t ? n(p.time_ms.p90) : "")
       << ',' << (t ? n(p.time_ms.min) : "") << ',' << n(p.tflops) << ',' << n(p.tbps) << ',' << p.rate_class << ','
       << n(p.rate_tflops) << ',' << n(p.read_tbps) << ',' << n(p.roofline_ms) << ',' << n(p.pct_roofline) << ','
       << p.bound << ',' << p.check_tokens << ',' << n(p.rel_err) << ',' << n(p.tol) << ',' << p.nonfinite << ',';
    if (p.has_stages)
      os << n(p.stages.permute_ms) << ',' << n(p.stages.gemm1_ms) << ',' << n(p.stages.activation_ms) << ','
         << n(p.stages.gemm2_ms) << ',' << n(p.stages.finalize_ms) << ',' << n(p.stages.total_ms) << ',';
    else
      os << ",,,,,,";
    os << csv_escape(p.routing_file) << ',' << csv_escape(p.note) << '\n';
  }
  return os.str();
}

void print_table(FILE* out, const RunInfo& info, const std::vector<Point>& points) {
  const DeviceInfo& d = info.device;
  std::fprintf(out, "fusedmoe-bench %s  commit %s  %s\n", info.tool_version.c_str(), info.commit.c_str(),
               info.date_utc.c_str());
  if (!info.dry_run) {
    std::fprintf(out, "device %d: %s, cc %d.%d, %d SMs, L2 %.0f MB, %.1f GB, peak clocks SM %d / mem %d MHz, driver %s, CUDA %d/%d\n",
                 d.index, d.name.c_str(), d.cc_major, d.cc_minor, d.sm_count, d.l2_bytes / 1e6, d.mem_bytes / 1e9,
                 d.peak_sm_clock_mhz, d.peak_mem_clock_mhz, d.driver_version.empty() ? "?" : d.driver_version.c_str(),
                 d.cuda_driver_version, d.cuda_runtime_version);
    for (const ClockSample& c : d.clocks)
      std::fprintf(out, "  clocks (%s): SM %d MHz, mem %d MHz, %d C, %.0f W\n", c.when.c_str(), c.sm_mhz, c.mem_mhz,
                   c.temperature_c, c.power_w);
    const Ceilings& c = info.ceilings;
    std::fprintf(out,
                 "ceilings: HBM read %s TB/s, copy %s TB/s, bf16 %s TFLOP/s, fp8 %s (fast accum %s) TFLOP/s, fp32 SIMT "
                 "%s, TF32 %s TFLOP/s; roofline uses fp8=%s, fp32=%s\n",
                 fmt("%.2f", c.hbm_read_tbps).c_str(), fmt("%.2f", c.copy_tbps).c_str(), fmt("%.0f", c.bf16_tflops).c_str(),
                 fmt("%.0f", c.fp8_tflops).c_str(), fmt("%.0f", c.fp8_fast_accum_tflops).c_str(),
                 fmt("%.1f", c.fp32_simt_tflops).c_str(), fmt("%.0f", c.tf32_tflops).c_str(), info.fp8_rate_choice.c_str(),
                 info.fp32_rate_choice.c_str());
    if (!c.errors.empty()) std::fprintf(out, "ceiling errors: %s\n", c.errors.c_str());
  }
  std::fprintf(out, "\n%-20s %-11s %-8s %5s %4s %10s %10s %10s %8s %6s %6s %4s %9s %-6s\n", "preset", "format", "routing",
               "M", "hit", "median_us", "p10_us", "p90_us", "TFLOP/s", "TB/s", "%roof", "bnd", "rel_err", "status");
  for (const Point& p : points) {
    const bool t = p.time_ms.n > 0;
    std::fprintf(out, "%-20s %-11s %-8s %5lld %4lld %10s %10s %10s %8s %6s %6s %4s %9s %-6s\n", p.preset.c_str(),
                 p.format.c_str(), p.routing.c_str(), static_cast<long long>(p.M), static_cast<long long>(p.experts_hit),
                 t ? fmt("%.1f", p.time_ms.median * 1e3).c_str() : "-", t ? fmt("%.1f", p.time_ms.p10 * 1e3).c_str() : "-",
                 t ? fmt("%.1f", p.time_ms.p90 * 1e3).c_str() : "-", fmt("%.1f", p.tflops).c_str(),
                 fmt("%.2f", p.tbps).c_str(), fmt("%.1f", p.pct_roofline).c_str(), p.bound.substr(0, 3).c_str(),
                 fmt("%.2e", p.rel_err).c_str(), p.status.c_str());
  }
  bool any_stage = false;
  for (const Point& p : points) any_stage = any_stage || p.has_stages;
  if (any_stage) {
    std::fprintf(out, "\nstage breakdown (run_timed, median of runs, us)\n%-20s %-11s %-8s %5s %9s %9s %9s %9s %9s %9s\n",
                 "preset", "format", "routing", "M", "permute", "gemm1", "act", "gemm2", "finalize", "total");
    for (const Point& p : points) {
      if (!p.has_stages) continue;
      const fusedmoe::StageTimes& s = p.stages;
      std::fprintf(out, "%-20s %-11s %-8s %5lld %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f\n", p.preset.c_str(), p.format.c_str(),
                   p.routing.c_str(), static_cast<long long>(p.M), s.permute_ms * 1e3, s.gemm1_ms * 1e3,
                   s.activation_ms * 1e3, s.gemm2_ms * 1e3, s.finalize_ms * 1e3, s.total_ms * 1e3);
    }
  }
  // Notes of points that did not pass, grouped so a format skipped everywhere is one line.
  std::map<std::string, int> notes;
  for (const Point& p : points)
    if (p.status != "OK" && p.status != "DRY") notes[p.status + " " + p.preset + " " + p.format + ": " + p.note]++;
  if (!notes.empty()) {
    std::fprintf(out, "\nnotes\n");
    for (const auto& [k, count] : notes) std::fprintf(out, "  %s%s\n", k.c_str(), count > 1 ? (" (x" + std::to_string(count) + ")").c_str() : "");
  }
  int ok = 0, fail = 0, skip = 0, err = 0;
  for (const Point& p : points) {
    if (p.status == "OK" || p.status == "DRY") ++ok;
    else if (p.status == "FAIL") ++fail;
    else if (p.status == "ERROR") ++err;
    else ++skip;
  }
  std::fprintf(out, "\n%d ok, %d failed, %d errors, %d skipped; %.1f s\n", ok, fail, err, skip, info.wall_s);
}

}  // namespace fmbench
