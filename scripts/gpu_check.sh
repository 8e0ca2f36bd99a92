#!/usr/bin/env bash
# On a GPU machine: build everything with CUDA, run the whole GPU test suite, compute-sanitizer
# memcheck on a representative subset, and the Python package's pytest suite (GPU tests
# included) against a CUDA build of the package. Logs go to $OUT (default out/gpu-check).
#
#   scripts/gpu_check.sh [phases]      phases: build tests sanitize python (default: all)
#
# FUSEDMOE_KIT=DIR: for machines without GoogleTest / nlohmann-json / the CUTLASS headers
# installed (the lent GPU machines have no package registry): DIR/usr holds them as Debian
# lays them out (include/, lib/x86_64-linux-gnu/, share/cmake/) and DIR/cutlass the CUTLASS
# headers (include/ and tools/util/include/).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu-check}
mkdir -p "$OUT"
PHASES=${*:-build tests sanitize python}
has() { [[ " $PHASES " == *" $1 "* ]]; }
BUILD=${FUSEDMOE_GPU_BUILD:-build-gpu}
cfg=()
if [[ -n "${FUSEDMOE_KIT:-}" ]]; then
  KIT=$(cd "$FUSEDMOE_KIT" && pwd)
  cfg+=("-DCMAKE_PREFIX_PATH=$KIT/usr" "-DFUSEDMOE_CUTLASS_DIR=$KIT/cutlass")
fi
status=0
log() { echo "[gpu_check $(date -u +%H:%M:%S)] $*" >&2; }

if has build; then
  log "build in $BUILD"
  if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEDMOE_CUDA=ON "${cfg[@]}" &&
         cmake --build "$BUILD" -j "$(nproc)"; } >"$OUT/build.log" 2>&1; then
    tail -30 "$OUT/build.log" >&2
    log "build failed"
    exit 3
  fi
fi
if has tests; then
  log "GPU test suite"
  "$BUILD/tests/fusedmoe_gpu_tests" >"$OUT/gpu_tests.log" 2>&1 || status=1
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]" "$OUT/gpu_tests.log" >&2
  log "CPU test suite (same build)"
  "$BUILD/tests/fusedmoe_cpu_tests" >"$OUT/cpu_tests.log" 2>&1 || status=1
  grep -E "^\[  (PASSED|FAILED) |^\[==========\]" "$OUT/cpu_tests.log" >&2
fi
if has sanitize; then
  log "compute-sanitizer memcheck subset"
  scripts/gpu_sanitize.sh "$BUILD/tests/fusedmoe_gpu_tests" >"$OUT/sanitize.log" 2>&1 || status=1
  grep -E "ERROR SUMMARY|LEAK SUMMARY|PASSED|FAILED" "$OUT/sanitize.log" >&2
fi
if has python; then
  log "Python package (CUDA build) and its pytest suite"
  py_cfg=()
  [[ -n "${FUSEDMOE_KIT:-}" ]] && py_cfg+=(-C "cmake.define.CMAKE_PREFIX_PATH=$KIT/usr" -C "cmake.define.FUSEDMOE_CUTLASS_DIR=$KIT/cutlass")
  if FUSEDMOE_CUDA=ON CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install -q --no-build-isolation --no-deps \
       --target "$BUILD/pysite" "${py_cfg[@]}" . >"$OUT/python_build.log" 2>&1; then
    (cd "$BUILD" && PYTHONPATH="$PWD/pysite" python3 -m pytest -q -rs ../tests/python) >"$OUT/python_tests.log" 2>&1 || status=1
    tail -15 "$OUT/python_tests.log" >&2
  else
    tail -30 "$OUT/python_build.log" >&2
    log "python build failed"
    status=1
  fi
fi
exit $status
