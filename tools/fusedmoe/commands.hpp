#pragma once
// The subcommands. Each returns the process exit code; errors are thrown (fusedmoe::Error,
// UsageError) and reported by main.
#include <string>
#include <vector>

namespace fusedmoe::cli {

// Exit codes of the command (documented in --help).
constexpr int kExitOk = 0;
constexpr int kExitError = 1;   // a file, a layer or a run failed
constexpr int kExitUsage = 2;   // bad command line
constexpr int kExitCheckFailed = 3;  // demo: the output is not within tolerance of the oracle

int cmd_run(const std::vector<std::string>& args);
int cmd_demo(const std::vector<std::string>& args);
int cmd_quantize(const std::vector<std::string>& args);

extern const char* const kRunUsage;
extern const char* const kDemoUsage;
extern const char* const kQuantizeUsage;

}  // namespace fusedmoe::cli
