// fusedmoe: command-line front end of the library. Subcommands: run, demo, quantize.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "fusedmoe/error.hpp"

namespace {

const char* const kUsage =
    "usage: fusedmoe COMMAND [options]     (fusedmoe COMMAND --help for its options)\n"
    "\n"
    "commands:\n"
    "  run       run a layer file on an input file, write the output file\n"
    "  demo      build a synthetic layer of a real model's shape, run it, check it against\n"
    "            the float64 oracle\n"
    "  quantize  convert a bf16/fp16/fp32 layer file to any format\n"
    "\n"
    "Files follow docs/LAYER_FILE.md. Exit status: 0 ok, 1 error, 2 bad command line,\n"
    "3 demo accuracy check failed.\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace fusedmoe::cli;
  const std::vector<std::string> all(argv + 1, argv + argc);
  if (all.empty()) {
    std::fputs(kUsage, stderr);
    return kExitUsage;
  }
  const std::string cmd = all[0];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (cmd == "--version") {
    std::puts("fusedmoe 0.1.0");
    return kExitOk;
  }
  const std::vector<std::string> rest(all.begin() + 1, all.end());
  try {
    if (cmd == "run") return cmd_run(rest);
    if (cmd == "demo") return cmd_demo(rest);
    if (cmd == "quantize") return cmd_quantize(rest);
    std::fprintf(stderr, "fusedmoe: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
    return kExitUsage;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "fusedmoe %s: %s (see 'fusedmoe %s --help')\n", cmd.c_str(), e.what(), cmd.c_str());
    return kExitUsage;
  } catch (const fusedmoe::Error& e) {
    std::fprintf(stderr, "fusedmoe %s: error: %s\n", cmd.c_str(), e.what());
    return kExitError;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "fusedmoe %s: error: out of memory\n", cmd.c_str());
    return kExitError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fusedmoe %s: internal error: %s\n", cmd.c_str(), e.what());
    return kExitError;
  }
}
