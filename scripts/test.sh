#!/usr/bin/env bash
# One command: set up, build, and pass the tests. CPU tests always; the GPU suite too when a
# GPU is present (FUSEDMOE_GPU_TESTS=0 skips it); then the CPU tests again under ASan+UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
if [ "${FUSEDMOE_GPU_TESTS:-auto}" != 0 ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "test: GPU found, running every test" >&2
  ctest --test-dir build --output-on-failure -j 2
else
  echo "test: no GPU here: the GPU-labelled tests are skipped (not run)" >&2
  ctest --test-dir build --output-on-failure -j 2 -LE gpu
fi
# Python package: installed (CPU backend) into a fresh venv, then its pytest suite.
# FUSEDMOE_PY_CUDA=AUTO builds the package's CUDA backend too (slow: CUTLASS instances).
python3 -m venv build/pyvenv
FUSEDMOE_CUDA=${FUSEDMOE_PY_CUDA:-OFF} CMAKE_BUILD_PARALLEL_LEVEL=${FUSEDMOE_JOBS:-$(nproc)} \
  build/pyvenv/bin/pip install -q --disable-pip-version-check . pytest numpy matplotlib
(cd build && pyvenv/bin/python -m pytest -q ../tests/python)
if [ "${FUSEDMOE_SANITIZE_TESTS:-1}" = 1 ]; then
  echo "test: CPU tests under AddressSanitizer + UndefinedBehaviorSanitizer" >&2
  FUSEDMOE_BUILD_DIR=build-asan ./scripts/build.sh -DFUSEDMOE_CUDA=OFF -DFUSEDMOE_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
  ctest --test-dir build-asan --output-on-failure -j 2 -LE gpu
fi
