#!/usr/bin/env bash
# Installs everything fusedmoe needs to build and test, from Debian packages and PyPI only.
# Idempotent: skips what is already there. Run as root (or with sudo available).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then SUDO=sudo; fi

need_pkgs=()
for pkg in cmake ninja-build g++ libgtest-dev nlohmann-json3-dev python3-pip python3-venv; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_pkgs+=("$pkg")
done
if [ "${FUSEDMOE_FUZZ_DEPS:-0}" = 1 ]; then
  for pkg in clang libclang-rt-dev; do dpkg -s "$pkg" >/dev/null 2>&1 || need_pkgs+=("$pkg"); done
fi
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "setup: apt-get install ${need_pkgs[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
# CUTLASS headers (PyPI nvidia-cutlass) for the CUDA backend, only where nvcc exists.
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  if [ ! -d third_party/cutlass/cutlass_library/source/include/cutlass ]; then
    echo "setup: pip install nvidia-cutlass==4.2.0.0 headers into third_party/cutlass" >&2
    $PY -m pip install -q --disable-pip-version-check --no-deps --target third_party/cutlass nvidia-cutlass==4.2.0.0
  fi
fi
# NCCL (expert parallelism over GPUs): ships with the CUDA toolkit; where a toolkit lacks it,
# the PyPI package (found by cmake/ep.cmake through `import nvidia.nccl`).
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  if [ ! -f /usr/local/cuda/include/nccl.h ] && [ -z "${NCCL_ROOT:-}" ] && ! $PY -c "import nvidia.nccl" >/dev/null 2>&1; then
    echo "setup: pip install nvidia-nccl-cu13 (NCCL for expert parallelism)" >&2
    $PY -m pip install -q --disable-pip-version-check nvidia-nccl-cu13 || echo "setup: no NCCL: EP builds with the thread transport only" >&2
  fi
fi
# Python test/bench dependencies (the report script and its pytest).
if ! $PY -c "import pytest, numpy, matplotlib" >/dev/null 2>&1; then
  echo "setup: pip install pytest numpy matplotlib" >&2
  $PY -m pip install -q --disable-pip-version-check pytest numpy matplotlib
fi
echo "setup: done" >&2
