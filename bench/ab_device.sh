#!/usr/bin/env bash
# A same-binary A/B of one environment switch on the device machine, from carried binaries (the results folders'
# run.sh files were near-copies of this before 2026-11-28):
#
#   bash bench/ab_device.sh NAME SWITCH 'PRESET M_LIST FORMATS' ['PRESET M_LIST FORMATS' ...]
#
# e.g. bash bench/ab_device.sh pf FUSEDMOE_W4_PAIR_FINE=0 'deepseek-v3-tp1 4096 mxfp4,nvfp4' 'gpt-oss-120b 4096 mxfp4'
#
# Binaries: .devcarry/pack/bins.tgz holding bin/bench (fusedmoe-bench), bin/tests (fusedmoe_gpu_tests) and bin/sha
# (README.md, "Benchmarks on the device" shows how they are packed). Variants: off = SWITCH set, on = the default;
# AB_ON: environment of the on variant (default none); run interleaved in AB_ORDER (default
# off,on,on,off,off,on,on,off,off,on), base off, by bench/ab.py. Before the A/B,
# when set: AB_TESTS (a gtest filter, run on bin/tests) and AB_MEMCHECK (a filter run under compute-sanitizer memcheck).
# Results under $OUT/NAME: device.txt, tests_summary.txt, ab_<i>.md (ab.py's table), stages_<i>.txt (each run's stage
# breakdown), and NAME.tgz with the runs' JSON and logs. AB_TIMEOUT bounds each A/B (seconds, default 240).
set -u
name=$1 switch=$2
shift 2
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s)
B=$PWD/.devcarry/bin R=/tmp/ab_$name O=$OUT/$name
mkdir -p "$R" "$O"
{ nvidia-smi --query-gpu=name,driver_version --format=csv; cat "$B/sha"; date -u; } > "$O/device.txt"
if [ -n "${AB_TESTS:-}" ]; then
  timeout 300 "$B/tests" --gtest_filter="$AB_TESTS" > "$R/tests.log" 2>&1
  echo "tests rc=$? $(($(date +%s) - t0))s"
fi
if [ -n "${AB_MEMCHECK:-}" ]; then
  timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 "$B/tests" --gtest_filter="$AB_MEMCHECK" > "$R/memcheck.log" 2>&1
  echo "memcheck rc=$? $(($(date +%s) - t0))s"
fi
for f in tests memcheck; do
  [ -f "$R/$f.log" ] && grep -E "^\[  FAILED|PASSED|FAILED  \]|ERROR SUMMARY|SKIPPED \]" "$R/$f.log" | tail -8 | sed "s/^/$f: /"
done | tee "$O/tests_summary.txt"
i=0
for point in "$@"; do
  i=$((i + 1))
  read -r preset ms formats <<< "$point"
  timeout "${AB_TIMEOUT:-240}" python3 bench/ab.py run --bench "$B/bench" --out "$R/ab_$i" --variant "off:$switch" \
    --variant "on:${AB_ON:-}" --order "${AB_ORDER:-off,on,on,off,off,on,on,off,off,on}" --base off -- --preset "$preset" --m "$ms" \
    --formats "$formats" --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.3 > "$R/ab_$i.log" 2>&1
  echo "ab $i ($point) rc=$? $(($(date +%s) - t0))s"
  sed -n '/| preset/,$p' "$R/ab_$i.log" | tee "$O/ab_$i.md"
  python3 bench/ab.py stages $(ls -d "$R/ab_$i"/*_*/) > "$O/stages_$i.txt" 2>&1
done
find "$R" -name "*.npy" -delete
find "$R" -type d -name routing -print0 | xargs -0 -r rm -rf
tar czf "$O/$name.tgz" -C "$R" .
echo "done $(($(date +%s) - t0))s"
