#!/usr/bin/env bash
# An interleaved A/B of environment switches (or of builds) on the device machine, from carried binaries (the
# results folders' run.sh files were near-copies of this before 2026-11-28):
#
#   bash bench/ab_device.sh NAME SWITCH 'PRESET M_LIST FORMATS' ['PRESET M_LIST FORMATS' ...]
#
# e.g. bash bench/ab_device.sh pf FUSEDMOE_W4_PAIR_FINE=0 'deepseek-v3-tp1 4096 mxfp4,nvfp4' 'gpt-oss-120b 4096 mxfp4'
#
# Binaries: AB_PACK (default .devcarry/pack/bins.tgz) holding bin/bench (fusedmoe-bench), bin/tests
# (fusedmoe_gpu_tests) and bin/sha (bench/README.md, "On the shared device machine", shows how they are packed), unpacked into
# AB_DIR (default .devcarry). Variants: off = SWITCH set, on = the default (AB_ON: environment of the on variant,
# default none); or AB_VARIANTS, a space-separated list of NAME:VAR=VALUE,... (ab.py's --variant; SWITCH is then
# ignored, give -), with AB_VARIANT_BENCH a space-separated list of NAME=FILE for variants that run another binary of
# the pack (bin/FILE: builds compared with each other). Run interleaved in AB_ORDER (default for two variants
# off,on,on,off,off,on,on,off,off,on in their names; for more, the list forward, backward, forward), compared with
# AB_BASE (default the first variant) by bench/ab.py; the bench arguments after each point's are AB_BENCH_ARGS
# (default: oracle check of 2 tokens, no ceilings, 3 stage runs, 0.3 minutes a point). Before the A/B, when set:
# AB_TESTS (a gtest filter, run on bin/tests) and AB_MEMCHECK (a filter run under compute-sanitizer memcheck).
# AB_TIMEOUT bounds each A/B (seconds, default 240).
# Results: one file, $OUT/NAME.tgz (the device tool returns a limited number of files), holding NAME/device.txt,
# tests_summary.txt, ab_<i>.md (ab.py's table, also printed), stages_<i>.txt (each run's stage breakdown) and runs.tgz
# (the runs' JSON and logs).
set -u
name=$1 switch=$2
shift 2
D=${AB_DIR:-.devcarry}
mkdir -p "$D" && tar xf "${AB_PACK:-.devcarry/pack/bins.tgz}" -C "$D" || { echo "ab_device: cannot unpack the binaries"; exit 2; }
t0=$(date +%s)
B=$(cd "$D/bin" && pwd) R=$(mktemp -d /tmp/ab_"$name".XXXX) O=$OUT/$name
mkdir -p "$O"
{ nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1; cat "$B/sha"; date -u; } > "$O/device.txt"
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

read -r -a specs <<< "${AB_VARIANTS:-off:$switch on:${AB_ON:-}}"
names=()
vargs=()
for s in "${specs[@]}"; do names+=("${s%%:*}"); vargs+=(--variant "$s"); done
for s in ${AB_VARIANT_BENCH:-}; do vargs+=(--variant-bench "${s%%=*}=$B/${s#*=}"); done
if [ -z "${AB_ORDER:-}" ]; then
  if [ ${#names[@]} -eq 2 ]; then
    a=${names[0]} b=${names[1]}
    AB_ORDER=$a,$b,$b,$a,$a,$b,$b,$a,$a,$b
  else
    fwd=$(IFS=,; echo "${names[*]}")
    bwd=$(for ((j = ${#names[@]} - 1; j >= 0; j--)); do printf '%s,' "${names[j]}"; done)
    AB_ORDER=$fwd,${bwd%,},$fwd
  fi
fi
read -r -a bargs <<< "${AB_BENCH_ARGS:---check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.3}"
i=0
for point in "$@"; do
  i=$((i + 1))
  read -r preset ms formats <<< "$point"
  timeout "${AB_TIMEOUT:-240}" python3 bench/ab.py run --bench "$B/bench" --out "$R/ab_$i" "${vargs[@]}" \
    --order "$AB_ORDER" --base "${AB_BASE:-${names[0]}}" -- --preset "$preset" --m "$ms" --formats "$formats" \
    "${bargs[@]}" > "$R/ab_$i.log" 2>&1
  echo "ab $i ($point) rc=$? $(($(date +%s) - t0))s"
  sed -n '/| preset/,$p' "$R/ab_$i.log" | tee "$O/ab_$i.md"
  [ -s "$O/ab_$i.md" ] || tail -5 "$R/ab_$i.log"
  python3 bench/ab.py stages $(ls -d "$R/ab_$i"/*_*/ 2>/dev/null) > "$O/stages_$i.txt" 2>&1
done
find "$R" -name "*.npy" -delete
find "$R" -type d -name routing -print0 | xargs -0 -r rm -rf
tar czf "$O/runs.tgz" -C "$R" .
rm -rf "$R"
tar czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -rf "${OUT:?}/$name"
echo "done $(($(date +%s) - t0))s: $OUT/$name.tgz"
