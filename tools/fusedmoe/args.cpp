#include "args.hpp"

#include <charconv>
#include <cmath>

namespace fusedmoe::cli {

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

Args::Args(const std::string& command, const std::vector<std::string>& argv, const std::vector<OptionSpec>& specs)
    : command_(command) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "-h" || a == "--help") {
      help_ = true;
      continue;
    }
    if (a.rfind("--", 0) != 0 || a.size() == 2) throw UsageError("unexpected argument '" + a + "'");
    const size_t eq = a.find('=');
    const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const OptionSpec* spec = nullptr;
    for (const OptionSpec& s : specs)
      if (name == s.name) spec = &s;
    if (!spec) throw UsageError("unknown option '--" + name + "' for '" + command_ + "'");
    if (values_.count(name)) throw UsageError("option '--" + name + "' given twice");
    std::string value;
    if (spec->takes_value) {
      if (eq != std::string::npos) {
        value = a.substr(eq + 1);
      } else {
        // A value may not look like an option: "--out --backend" is a forgotten value.
        if (i + 1 >= argv.size() || argv[i + 1].rfind("--", 0) == 0)
          throw UsageError("option '--" + name + "' needs a value");
        value = argv[++i];
      }
      if (value.empty()) throw UsageError("option '--" + name + "' needs a non-empty value");
    } else if (eq != std::string::npos) {
      throw UsageError("option '--" + name + "' takes no value");
    }
    values_[name] = value;
  }
}

std::string Args::str(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second;
}

std::string Args::required(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw UsageError("missing required option '--" + name + "'");
  return it->second;
}

int64_t Args::integer(const std::string& name, int64_t def, int64_t lo, int64_t hi) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  const std::string& s = it->second;
  int64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size())
    throw UsageError("option '--" + name + "': '" + s + "' is not an integer");
  if (v < lo || v > hi)
    throw UsageError("option '--" + name + "': " + s + " is out of range [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  return v;
}

double Args::number(const std::string& name, double def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  const std::string& s = it->second;
  double v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size() || !std::isfinite(v))
    throw UsageError("option '--" + name + "': '" + s + "' is not a finite number");
  return v;
}

std::string Args::choice(const std::string& name, const std::string& def, const std::vector<std::string>& choices) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  for (const std::string& c : choices)
    if (c == it->second) return c;
  throw UsageError("option '--" + name + "': '" + it->second + "' is not one of " + join(choices));
}

}  // namespace fusedmoe::cli
