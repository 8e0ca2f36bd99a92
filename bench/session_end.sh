#!/usr/bin/env bash
# The end-of-session check on the device machine, from carried binaries, in one command (the results folders'
# final.sh files were near-copies of this until 2026-11-28):
#
#   bash bench/session_end.sh NAME
#
# Steps (SE_STEPS, default "suite memcheck switches grid"), each bounded by its own timeout:
#   suite     the whole GPU test suite (bin/tests; SE_SUITE_TIMEOUT, default 420 s)
#   memcheck  compute-sanitizer memcheck of the tests matching SE_MEMCHECK (default the decode-size 4-bit tests)
#   switches  the tests of each entry of SE_SWITCHES, a space-separated list of VAR=VALUE@FILTER (default the 4-bit
#             tests with FUSEDMOE_W4_LEAN=0: the decode a switch keeps alive must keep passing)
#   grid      bench/run_gpu_bench.sh's bench, repeat, peers and report phases over SE_PRESETS x SE_M x SE_FORMATS
#             (default issue 6's grid: gpt-oss-120b, DeepSeek-V3 TP1, Qwen3-30B-A3B; 1..4096 tokens; the five 4-bit
#             formats), SE_GRID_MINUTES (3) for the bench, SE_PEERS_MINUTES (1.2) for the PyTorch peers,
#             SE_GRID_TIMEOUT (230 s) for all of it, SE_REPEAT ("PRESETS M FORMATS" timed again in a second process,
#             default "qwen3-30b-a3b-tp1 8 mxfp4"; - for none), SE_GRID_PHASES (default "bench repeat peers report").
#             With SE_OLD (a fusedmoe-bench.json(.gz) of an earlier grid, path relative to the repository root) the
#             summary compares with it.
# Binaries: SE_PACK (default .devcarry/pack/bins.tgz) holding bin/bench, bin/tests and bin/sha (bench/README.md,
# "On the shared device machine"), unpacked into SE_DIR (default .devcarry).
# Results: one file, $OUT/NAME.tgz (the device tool returns a limited number of files): NAME/suite/summary.txt (every
# step's verdict lines), the steps' logs gzipped, NAME/grid/ (the bench and peers JSON gzipped, the report,
# summary.md from bench/w4_grid_summary.py), device.txt in both.
set -u
name=${1:?usage: bash bench/session_end.sh NAME}
D=${SE_DIR:-.devcarry}
mkdir -p "$D" && tar xf "${SE_PACK:-.devcarry/pack/bins.tgz}" -C "$D" || { echo "session_end: cannot unpack the binaries"; exit 2; }
t0=$(date +%s)
B=$(cd "$D/bin" && pwd) S=$(tr -d '\n' < "$D/bin/sha") O=$OUT/$name
mkdir -p "$O/suite" "$O/grid"
for d in "$O/suite" "$O/grid"; do
  { nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1; echo "commit $S (binaries built from it)"; date -u; } > "$d/device.txt"
done
steps=" ${SE_STEPS:-suite memcheck switches grid} "
verdicts() {  # gtest / sanitizer verdict lines of log $1, prefixed with $2
  grep -E "^\[  FAILED|PASSED  \]|FAILED  \]|SKIPPED \]|ERROR SUMMARY" "$1" | tail -8 | sed "s|^|$2: |" | tee -a "$O/suite/summary.txt"
}
elapsed() { echo "$(($(date +%s) - t0))s"; }

if [[ $steps == *" suite "* ]]; then
  timeout "${SE_SUITE_TIMEOUT:-420}" "$B/tests" > "$O/suite/gpu_tests.log" 2>&1
  echo "suite rc=$? $(elapsed)" | tee -a "$O/suite/summary.txt"
  verdicts "$O/suite/gpu_tests.log" suite
fi
if [[ $steps == *" memcheck "* ]]; then
  timeout "${SE_MEMCHECK_TIMEOUT:-120}" compute-sanitizer --tool memcheck --error-exitcode 3 "$B/tests" \
    --gtest_filter="${SE_MEMCHECK:-Formats/W4Gpu.DecodeSizesMatchOracle/*}" > "$O/suite/memcheck.log" 2>&1
  echo "memcheck rc=$? $(elapsed)" | tee -a "$O/suite/summary.txt"
  verdicts "$O/suite/memcheck.log" memcheck
fi
if [[ $steps == *" switches "* ]]; then
  w4='Formats/W4Gpu.*:W4GpuEdge.*:AllFormatsActivations/LayerGpu.MatchesOracle/*fp4*:Shapes/DecodeLayerW4Gpu.*'
  i=0
  for entry in ${SE_SWITCHES:-FUSEDMOE_W4_LEAN=0@$w4}; do
    i=$((i + 1))
    var=${entry%%@*} filter=${entry#*@}
    env "$var" timeout "${SE_SWITCH_TIMEOUT:-120}" "$B/tests" --gtest_filter="$filter" > "$O/suite/switch_$i.log" 2>&1
    echo "switch $i ($var) rc=$? $(elapsed)" | tee -a "$O/suite/summary.txt"
    verdicts "$O/suite/switch_$i.log" "$var"
  done
fi
gzip -9 "$O"/suite/*.log 2>/dev/null

if [[ $steps == *" grid "* ]]; then
  G=$O/grid
  read -r rp rm rf <<< "${SE_REPEAT:-qwen3-30b-a3b-tp1 8 mxfp4}"
  phases=${SE_GRID_PHASES:-bench repeat peers report}
  [ "$rp" = - ] && phases=${phases//repeat/}
  # shellcheck disable=SC2086  # the phases are a list of words
  env FMB_PRESETS="${SE_PRESETS:-gpt-oss-120b,deepseek-v3-tp1,qwen3-30b-a3b-tp1}" FMB_M="${SE_M:-1,8,64,256,1024,4096}" \
    FMB_FORMATS="${SE_FORMATS:-w4a8-int4,mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4}" FMB_BENCH_MINUTES="${SE_GRID_MINUTES:-3}" \
    FMB_PEERS_MINUTES="${SE_PEERS_MINUTES:-1.2}" FMB_REPEAT_PRESETS="$rp" FMB_REPEAT_M="${rm:-}" FMB_REPEAT_FORMATS="${rf:-}" \
    FUSEDMOE_COMMIT="$S" FUSEDMOE_BENCH="$B/bench" FMB_WORK="$(mktemp -d /tmp/se_grid.XXXX)" OUT="$G" \
    timeout "${SE_GRID_TIMEOUT:-230}" bash bench/run_gpu_bench.sh $phases > "$G/grid.log" 2>&1
  echo "grid rc=$? $(elapsed)" | tee -a "$O/suite/summary.txt"
  grep -E "ok,|SKIP" "$G/grid.log" | tail -2 | sed 's/^/grid: /' | tee -a "$O/suite/summary.txt"
  rm -f "$G/results.tar.gz"
  find "$G" -name "*.npy" -delete
  find "$G" -type d -name routing -print0 | xargs -0 -r rm -rf
  for f in "$G"/*.json; do [ -f "$f" ] && gzip -9 "$f"; done
  if [ -f "$G/fusedmoe-bench.json.gz" ]; then
    old=()
    [ -n "${SE_OLD:-}" ] && old=("$SE_OLD")
    peers=$G/peers.json.gz
    [ -f "$peers" ] || { peers=$(mktemp /tmp/se_peers.XXXX); echo '{"points": []}' > "$peers"; }  # none timed
    python3 bench/w4_grid_summary.py "$G/fusedmoe-bench.json.gz" "$peers" "${old[@]}" > "$G/summary.md" 2>&1 ||
      echo "w4_grid_summary.py failed (its output in grid/summary.md)" | tee -a "$O/suite/summary.txt"
  fi
fi
tar czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -rf "${OUT:?}/$name"
echo "done $(elapsed): $OUT/$name.tgz"
