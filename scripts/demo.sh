#!/usr/bin/env bash
# One command: set up, build, and run the main job (a model-shaped MoE layer, checked against
# the float64 oracle): on the GPU where one exists, on the CPU backend otherwise.
# Arguments go to `fusedmoe demo` (e.g. --model mixtral-8x7b --format fp8-tensor --tokens 64).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh >/dev/null
exec ./build/tools/fusedmoe demo "$@"
