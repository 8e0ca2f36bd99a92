#!/usr/bin/env bash
# On a multi-GPU machine: build with CUDA + NCCL, run the expert-parallel GPU tests (EpGpu.*:
# 1, 2 and 4 GPUs as available), the EP CPU tests of the same build, and the EP benchmark for
# G = 1, 2, 4, ... up to the GPUs present. Logs and results go to $OUT (default out/ep-check).
#
#   scripts/ep_check.sh [phases]       phases: build tests bench (default: all)
#
# FUSEDMOE_KIT=DIR as in scripts/gpu_check.sh (DIR/usr: GoogleTest + nlohmann-json as Debian lays
# them out, DIR/cutlass: the CUTLASS headers). NCCL comes from the CUDA toolkit
# (/usr/local/cuda/include/nccl.h, lib64/libnccl.so), NCCL_ROOT, or pip nvidia-nccl-cu13.
# FUSEDMOE_EP_BENCH_ARGS: extra arguments of fusedmoe-ep-bench (e.g. "--reps 10 --mode both").
# NVLink multicast stays off: no NVLS in NCCL, none in NVSHMEM / torch symmetric memory either.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
OUT=${OUT:-out/ep-check}
mkdir -p "$OUT"
PHASES=${*:-build tests bench}
has() { [[ " $PHASES " == *" $1 "* ]]; }
BUILD=${FUSEDMOE_EP_BUILD:-build-ep}
cfg=()
if [[ -n "${FUSEDMOE_KIT:-}" ]]; then
  KIT=$(cd "$FUSEDMOE_KIT" && pwd)
  cfg+=("-DCMAKE_PREFIX_PATH=$KIT/usr" "-DFUSEDMOE_CUTLASS_DIR=$KIT/cutlass")
fi
status=0
log() { echo "[ep_check $(date -u +%H:%M:%S)] $*" >&2; }
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
log "GPUs: $NGPU"
{ nvidia-smi; nvidia-smi topo -m; } >"$OUT/gpus.txt" 2>&1 || true

if has build; then
  log "build in $BUILD (CUDA + NCCL)"
  if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEDMOE_CUDA=ON -DFUSEDMOE_NCCL="${FUSEDMOE_NCCL:-ON}" \
           ${FUSEDMOE_EP_CMAKE_ARGS:-} "${cfg[@]}" &&
         cmake --build "$BUILD" -j "$(nproc)" --target fusedmoe_gpu_tests fusedmoe_cpu_tests fusedmoe-ep-bench; } \
       >"$OUT/build.log" 2>&1; then
    tail -30 "$OUT/build.log" >&2
    log "build failed"
    exit 3
  fi
fi
if has tests; then
  log "EP GPU tests (NCCL, one thread per GPU)"
  NCCL_DEBUG=${NCCL_DEBUG:-WARN} timeout 1200 "$BUILD/tests/fusedmoe_gpu_tests" --gtest_filter='EpGpu.*' \
    >"$OUT/ep_gpu_tests.log" 2>&1 || status=1
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[       OK|^\[  FAILED|^\[==========\]|skip" "$OUT/ep_gpu_tests.log" >&2
  log "EP CPU tests (thread transport)"
  timeout 600 "$BUILD/tests/fusedmoe_cpu_tests" --gtest_filter='*EpCpu*' >"$OUT/ep_cpu_tests.log" 2>&1 || status=1
  grep -E "^\[  (PASSED|FAILED) |^\[==========\]" "$OUT/ep_cpu_tests.log" >&2
fi
if has bench; then
  gpus=""
  for ((g = 1; g <= NGPU; g *= 2)); do gpus+="${gpus:+,}$g"; done
  log "EP benchmark on $gpus GPU(s)"
  mkdir -p "$OUT/bench"
  # shellcheck disable=SC2086
  timeout 1800 "$BUILD/tools/ep_bench/fusedmoe-ep-bench" --gpus "$gpus" --out "$OUT/bench" ${FUSEDMOE_EP_BENCH_ARGS:-} \
    >"$OUT/bench.log" 2>&1 || status=1
  tail -40 "$OUT/bench.log" >&2
fi
exit $status
