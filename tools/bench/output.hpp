#pragma once
// One measured point, and the outputs: a table on stdout, CSV and JSON files.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ceilings.hpp"
#include "devinfo.hpp"
#include "fusedmoe/layer.hpp"
#include "timing.hpp"

namespace fmbench {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Point {
  // What
  std::string preset, format, routing, activation, hidden_dtype;
  int64_t E = 0, E_local = 0, topk = 0, K = 0, N = 0, ep = 1, M = 0;
  std::string routing_file, routing_weights_file;  // relative to the output directory
  // Outcome: OK, FAIL (wrong output), SKIP (not supported / not run), ERROR (threw while running)
  std::string status = "SKIP";
  std::string note;
  // Work
  int64_t valid_slots = 0, experts_hit = 0, max_tokens_per_expert = 0;
  double flops = 0, weight_bytes = 0, act_bytes = 0, bytes = 0;
  // Timing
  std::string timing_method;  // "graph" or "events"
  Stats time_ms;
  double tflops = kNaN, tbps = kNaN;
  // Roofline
  std::string rate_class;        // bf16 / fp8 / fp32-simt / tf32
  double rate_tflops = kNaN, read_tbps = kNaN;
  double roofline_ms = kNaN, pct_roofline = kNaN;
  std::string bound;  // "memory" or "compute"
  // Check against the float64 oracle
  bool checked = false;
  int check_tokens = 0;
  double rel_err = kNaN, tol = kNaN, check_ms = kNaN;
  long long nonfinite = -1;
  // Stage breakdown (median over runs of run_timed())
  bool has_stages = false;
  int stage_runs = 0;
  fusedmoe::StageTimes stages;
};

// Fills flops / bytes derived numbers (tflops, tbps, roofline) from time_ms and the ceilings.
void finish_point(Point& p, double read_tbps, double rate_tflops);

struct RunInfo {
  std::string tool_version, commit, command, date_utc, out_dir;
  std::string fp32_rate_choice, fp8_rate_choice, fp8_act_scale;
  bool dry_run = false;
  DeviceInfo device;
  Ceilings ceilings;
  // Method
  int warmup = 0, min_reps = 0, max_reps = 0, rotate = 0, stage_runs = 0, check_tokens = 0;
  double target_ms = 0, check_macs = 0;
  long long graph_max_m = 0;
  size_t flush_bytes = 0;
  std::string flush_mode = "read";
  uint64_t seed = 0;
  double wall_s = 0;
  std::vector<std::string> presets_spec;  // shape specs of the grid
};

std::string json_dump(const RunInfo& info, const std::vector<Point>& points);
std::string csv_dump(const std::vector<Point>& points);
void print_table(FILE* out, const RunInfo& info, const std::vector<Point>& points);

}  // namespace fmbench
