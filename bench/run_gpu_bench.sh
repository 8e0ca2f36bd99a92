#!/usr/bin/env bash
# One command for the GPU machine: build fusedmoe-bench (or use a carried binary), run it on the
# grid of the GPU-path issue, run a short repeat of a few points (timing variance), run the peers
# (bench/peers.py), and write the report (bench/report.py). Results go to $OUT when it is set.
#
#   bash bench/run_gpu_bench.sh            # all phases: build bench repeat peers report
#   bash bench/run_gpu_bench.sh build      # one phase (or several: bench repeat peers report)
#
# A device command has a 10-minute limit: when the build has to happen there, run `build` in one
# call and `bench repeat peers report` in the next while the machine is still warm (the work
# folder out/gpu-bench and the build folder stay between calls on a warm machine).
#
# Environment (all optional):
#   FUSEDMOE_BENCH      path of a fusedmoe-bench binary to use (skips the build)
#   FUSEDMOE_COMMIT     commit recorded in the results (default: git rev-parse, else unknown)
#   FMB_BUILD_DIR       build folder (default build-bench-gpu); FMB_CMAKE_ARGS: extra cmake args
#   FMB_PRESETS         default mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8
#   FMB_M               default 1,8,64,256,1024,4096
#   FMB_FORMATS         default all (formats the build cannot run are skipped with a note)
#   FMB_ROUTING         default uniform
#   FMB_BENCH_MINUTES   --max-minutes of the main run (default 5; the run is killed 2 minutes later)
#   FMB_PEERS_MINUTES   --max-minutes of peers.py (default 2; killed 2 minutes later)
#   With a carried binary the defaults keep all phases inside one 10-minute device command.
#   FMB_EXTRA_ARGS      extra fusedmoe-bench arguments for the main run (e.g. --shape ...)
#   FMB_REPEAT_EXTRA_ARGS, FMB_PEERS_ARGS   extra arguments of the repeat run and of peers.py
#   FMB_REPEAT_PRESETS / FMB_REPEAT_M / FMB_REPEAT_FORMATS   the repeated points
#                       (default mixtral-8x7b,deepseek-v3-tp8 / 1,256,4096 / bf16,fp8-tensor)
#   FMB_WORK            work folder (default out/gpu-bench)
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PHASES=${*:-build bench repeat peers report}
WORK=${FMB_WORK:-$ROOT/out/gpu-bench}
BUILD=${FMB_BUILD_DIR:-$ROOT/build-bench-gpu}
PRESETS=${FMB_PRESETS:-mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8}
MS=${FMB_M:-1,8,64,256,1024,4096}
FORMATS=${FMB_FORMATS:-all}
ROUTING=${FMB_ROUTING:-uniform}
REPEAT_PRESETS=${FMB_REPEAT_PRESETS:-mixtral-8x7b,deepseek-v3-tp8}
REPEAT_M=${FMB_REPEAT_M:-1,256,4096}
REPEAT_FORMATS=${FMB_REPEAT_FORMATS:-bf16,fp8-tensor}
COMMIT=${FUSEDMOE_COMMIT:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)}
FINAL=${OUT:-$WORK/final}
PY=${PYTHON:-python3}
mkdir -p "$WORK" "$FINAL"
# Keep NVLink multicast off everywhere (workplace rule; harmless on one GPU).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1

CMDLINE="FMB_PRESETS=$PRESETS FMB_M=$MS FMB_FORMATS=$FORMATS FMB_ROUTING=$ROUTING${FMB_EXTRA_ARGS:+ FMB_EXTRA_ARGS='$FMB_EXTRA_ARGS'} bash bench/run_gpu_bench.sh $PHASES"
echo "$CMDLINE" >"$WORK/command.txt"
log() { echo "[run_gpu_bench $(date -u +%H:%M:%S)] $*" >&2; }
has_phase() { [[ " $PHASES " == *" $1 "* ]]; }
STATUS=0

bench_bin() {
  if [[ -n "${FUSEDMOE_BENCH:-}" ]]; then echo "$FUSEDMOE_BENCH"; return; fi
  if [[ -x "$BUILD/tools/bench/fusedmoe-bench" ]]; then echo "$BUILD/tools/bench/fusedmoe-bench"; fi
}

if has_phase build; then
  if [[ -n "${FUSEDMOE_BENCH:-}" ]]; then
    log "using FUSEDMOE_BENCH=$FUSEDMOE_BENCH (no build)"
  else
    log "building fusedmoe-bench in $BUILD"
    t0=$(date +%s)
    # shellcheck disable=SC2086  # FMB_CMAKE_ARGS is a list of arguments
    if ! { cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEDMOE_CUDA=ON \
             -DFUSEDMOE_BUILD_TESTS=OFF ${FMB_CMAKE_ARGS:-} &&
           cmake --build "$BUILD" --target fusedmoe-bench -j "$(nproc)"; } >"$WORK/build.log" 2>&1; then
      tail -40 "$WORK/build.log" >&2
      log "build failed (full log: $WORK/build.log)"
      cp "$WORK/build.log" "$FINAL/" 2>/dev/null
      exit 3
    fi
    log "built in $(( $(date +%s) - t0 )) s"
  fi
fi

BENCH=$(bench_bin)
if has_phase bench || has_phase repeat; then
  if [[ -z "$BENCH" || ! -x "$BENCH" ]]; then
    log "no fusedmoe-bench binary: run the build phase or set FUSEDMOE_BENCH"
    exit 3
  fi
  # A binary built on another machine finds the CUDA libraries here.
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64:/usr/local/cuda/lib
  if ! "$BENCH" --list >/dev/null 2>"$WORK/bench-start.err"; then
    cat "$WORK/bench-start.err" >&2
    ldd "$BENCH" >&2 || true
    log "$BENCH does not start here"
    exit 3
  fi
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv >"$WORK/nvidia-smi.txt" 2>&1 || true
fi

if has_phase bench; then
  log "fusedmoe-bench: presets $PRESETS, M $MS, formats $FORMATS, routing $ROUTING"
  rm -rf "$WORK/main"
  BM=${FMB_BENCH_MINUTES:-5}
  # The results are written after every (shape, format), so a run stopped by the timeout still
  # leaves what it finished for the report.
  # shellcheck disable=SC2086
  timeout --signal=INT --kill-after=20 "$(( ${BM%.*} * 60 + 120 ))" \
    "$BENCH" --preset "$PRESETS" --m "$MS" --formats "$FORMATS" --routing "$ROUTING" --commit "$COMMIT" \
    --max-minutes "$BM" --out-dir "$WORK/main" ${FMB_EXTRA_ARGS:-} \
    >"$WORK/main.txt" 2> >(tee "$WORK/main.err" >&2)
  rc=$?
  cat "$WORK/main.txt"
  log "fusedmoe-bench exited $rc"
  [[ $rc -ne 0 ]] && STATUS=$rc
fi

if has_phase repeat; then
  log "repeat: $REPEAT_PRESETS, M $REPEAT_M, formats $REPEAT_FORMATS"
  rm -rf "$WORK/repeat"
  # shellcheck disable=SC2086
  timeout --signal=INT --kill-after=20 180 \
    "$BENCH" --preset "$REPEAT_PRESETS" --m "$REPEAT_M" --formats "$REPEAT_FORMATS" --routing "$ROUTING" \
    --commit "$COMMIT" --stage-runs 0 --no-check --max-minutes 1 --out-dir "$WORK/repeat" ${FMB_REPEAT_EXTRA_ARGS:-} \
    >"$WORK/repeat.txt" 2>"$WORK/repeat.err"
  log "repeat exited $? ($(tail -1 "$WORK/repeat.txt" 2>/dev/null))"
fi

if has_phase peers; then
  if [[ -f "$WORK/main/fusedmoe-bench.json" ]]; then
    log "peers.py"
    PM=${FMB_PEERS_MINUTES:-2}
    # shellcheck disable=SC2086
    timeout --signal=INT --kill-after=20 "$(( ${PM%.*} * 60 + 120 ))" \
      "$PY" "$ROOT/bench/peers.py" --bench-json "$WORK/main/fusedmoe-bench.json" --out "$WORK/peers.json" \
      --max-minutes "$PM" ${FMB_PEERS_ARGS:-} 2> >(tee "$WORK/peers.err" >&2)
    log "peers.py exited $?"
  else
    log "no $WORK/main/fusedmoe-bench.json: peers skipped"
  fi
fi

if has_phase report; then
  if [[ -f "$WORK/main/fusedmoe-bench.json" ]]; then
    rm -rf "$WORK/results"
    args=(--bench "$WORK/main/fusedmoe-bench.json" --results-dir "$WORK/results" --command "$CMDLINE")
    [[ -f "$WORK/peers.json" ]] && args+=(--peers "$WORK/peers.json")
    [[ -f "$WORK/repeat/fusedmoe-bench.json" ]] && args+=(--repeat "$WORK/repeat/fusedmoe-bench.json")
    md=$("$PY" "$ROOT/bench/report.py" "${args[@]}")
    log "report: $md"
    # What comes back from the device: at most 8 files, so the plots travel in one archive.
    cp "$md" "$FINAL/"
    tar -C "$WORK/results" -czf "$FINAL/results.tar.gz" .
    cp "$WORK/main/fusedmoe-bench.json" "$FINAL/fusedmoe-bench.json"
    [[ -f "$WORK/peers.json" ]] && cp "$WORK/peers.json" "$FINAL/peers.json"
    [[ -f "$WORK/repeat/fusedmoe-bench.json" ]] && cp "$WORK/repeat/fusedmoe-bench.json" "$FINAL/repeat.json"
    (cd "$WORK" && tar -czf "$FINAL/logs.tar.gz" --ignore-failed-read command.txt nvidia-smi.txt main.txt main.err \
       repeat.txt repeat.err peers.err main/fusedmoe-bench.csv repeat/fusedmoe-bench.csv 2>/dev/null)
    log "results in $FINAL: $(ls "$FINAL" | tr '\n' ' ')"
  else
    log "no $WORK/main/fusedmoe-bench.json: nothing to report"
  fi
fi
exit $STATUS
