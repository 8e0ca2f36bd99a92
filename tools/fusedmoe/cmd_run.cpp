// fusedmoe run: a layer file and an input file in, the output file out (docs/LAYER_FILE.md).
#include <cstdio>

#include "args.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "fusedmoe/error.hpp"

namespace fusedmoe::cli {

const char* const kRunUsage =
    "usage: fusedmoe run --layer LAYER.safetensors --input INPUT.safetensors --out OUTPUT.safetensors\n"
    "                    [--backend auto|cpu|cuda] [--threads T]\n"
    "\n"
    "Runs the expert layer on the batch and writes the output file (tensor 'output' [M,K], the\n"
    "dtype of hidden_states). The output is written to a temporary file and renamed, so on any\n"
    "error nothing is left at OUTPUT.\n"
    "  --backend  auto (default): cuda when built with CUDA and a GPU is present, else cpu; a layer\n"
    "             the CUDA backend cannot run yet then runs on cpu (with a note on stderr)\n"
    "  --threads  CPU threads (default 0 = all cores)\n";

int cmd_run(const std::vector<std::string>& argv) {
  const Args a("run", argv, {{"layer", true}, {"input", true}, {"out", true}, {"backend", true}, {"threads", true}});
  if (a.help()) {
    std::fputs(kRunUsage, stdout);
    return kExitOk;
  }
  const std::string layer_path = a.required("layer"), input_path = a.required("input"), out_path = a.required("out");
  const Backend requested = parse_backend(a.str("backend", "auto"));
  const int threads = static_cast<int>(a.integer("threads", 0, 0, 4096));

  const LayerFile layer = read_layer_file(layer_path);
  const InputFile input = read_input_file(input_path);
  check_input_against_layer(input, layer, "'" + input_path + "'");
  const Backend backend = resolve_backend(requested);
  RunResult r;
  Backend used = backend;
  try {
    r = execute_with_fallback(layer, input, requested, backend, threads, 1, &used);
  } catch (const Error& e) {
    // Argument errors here are mismatches between the two files (e.g. hidden size).
    throw Error("cannot run layer '" + layer_path + "' on input '" + input_path + "': " + e.what());
  }
  write_output_file(out_path, r.output);
  std::printf("%s layer E=%lld K=%lld N=%lld, %lld tokens top-%lld, %s backend: %.3f ms -> %s\n",
              format_name(layer.config.format), static_cast<long long>(layer.num_experts),
              static_cast<long long>(layer.hidden), static_cast<long long>(layer.inter),
              static_cast<long long>(input.hidden_states.shape[0]), static_cast<long long>(input.topk_ids.shape[1]),
              backend_name(used), r.ms, out_path.c_str());
  return kExitOk;
}

}  // namespace fusedmoe::cli
