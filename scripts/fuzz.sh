#!/usr/bin/env bash
# Builds the libFuzzer target for the layer/input file readers and runs it.
# Usage: scripts/fuzz.sh [SECONDS=60] [extra libFuzzer flags...]
# Build dir: build-fuzz/ (clang, ASan+UBSan); the corpus grows in build-fuzz/corpus/ across runs,
# crashes land in build-fuzz/artifacts/. Exits non-zero when the fuzzer finds a bug.
set -euo pipefail
seconds="${1:-60}"
shift || true
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-fuzz"

CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFUSEDMOE_FUZZ=ON -DFUSEDMOE_CUDA=OFF -DFUSEDMOE_BUILD_TESTS=OFF -DFUSEDMOE_BUILD_TOOLS=OFF >/dev/null
cmake --build "$build" --target layer_file_fuzz make_seed_corpus -j "${FUZZ_BUILD_JOBS:-2}"

seeds="$build/seeds"
rm -rf "$seeds"
mkdir -p "$seeds" "$build/corpus" "$build/artifacts"
"$build/fuzz/make_seed_corpus" "$seeds"

# -max_len covers the largest seed (a w4a8 layer); -timeout catches pathological slow inputs.
exec "$build/fuzz/layer_file_fuzz" "$build/corpus" "$seeds" \
  -dict="$root/fuzz/layer_file.dict" -max_len=32768 -timeout=10 -rss_limit_mb=2048 \
  -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$build/artifacts/" "$@"
