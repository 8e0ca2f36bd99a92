#pragma once
// A small strict command-line parser: --name VALUE or --name=VALUE, flags, no positionals.
// Unknown options, missing or malformed values and repeated options are UsageErrors (exit 2).
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace fusedmoe::cli {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct OptionSpec {
  const char* name;  // without the leading "--"
  bool takes_value;
};

class Args {
 public:
  // argv[0] is the subcommand name; "-h"/"--help" sets help().
  Args(const std::string& command, const std::vector<std::string>& argv, const std::vector<OptionSpec>& specs);

  bool help() const { return help_; }
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  bool flag(const std::string& name) const { return has(name); }
  std::string str(const std::string& name, const std::string& def) const;
  std::string required(const std::string& name) const;
  // A decimal integer in [lo, hi].
  int64_t integer(const std::string& name, int64_t def, int64_t lo, int64_t hi) const;
  // A finite decimal number.
  double number(const std::string& name, double def) const;
  // One of `choices`.
  std::string choice(const std::string& name, const std::string& def, const std::vector<std::string>& choices) const;

 private:
  std::string command_;
  std::map<std::string, std::string> values_;
  bool help_ = false;
};

std::string join(const std::vector<std::string>& v, const char* sep = ", ");

}  // namespace fusedmoe::cli
