#!/usr/bin/env bash
# Configures and builds fusedmoe into build/ (CUDA backend when nvcc is found).
# Extra arguments go to cmake's configure step, e.g. -DFUSEDMOE_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then export PATH=/usr/local/cuda/bin:$PATH; fi
BUILD=${FUSEDMOE_BUILD_DIR:-build}
JOBS=${FUSEDMOE_JOBS:-$(nproc)}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$BUILD" -j "$JOBS"
