#!/usr/bin/env bash
# Two 16-row tiles per warp in the mma kernel's plain 8-token tile, the stage stream running on across them (w4_gemm.cu
# kTiles; FUSEDMOE_W4_TILES=2 turns it on, a probe). `bash bench/results/2026-11-28-h200-w4-tiles/run.sh` from the
# repository root on the device: the 4-bit tests with it on, memcheck, then the same-binary A/B.
set -u
tar xf .devcarry/pack/bins.tgz -C .devcarry
T='Formats/W4Gpu.*:W4MmaActGpu.*:*LayerGpu*fp4*:*DecodeLayerW4*:*FinalizePaths*'
mkdir -p "$OUT/tiles_tests"
FUSEDMOE_W4_TILES=2 timeout 240 .devcarry/bin/tests --gtest_filter="$T" > "$OUT/tiles_tests/tests.log" 2>&1
echo "tests (tiles on) rc=$?"; grep -E '^\[  FAILED|PASSED|FAILED  \]|SKIPPED \]' "$OUT/tiles_tests/tests.log" | tail -5
FUSEDMOE_W4_TILES=2 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 .devcarry/bin/tests \
  --gtest_filter='Formats/W4Gpu.DecodeSizesMatchOracle/*' > "$OUT/tiles_tests/memcheck.log" 2>&1
echo "memcheck (tiles on) rc=$?"; grep -E 'PASSED|FAILED  \]|ERROR SUMMARY' "$OUT/tiles_tests/memcheck.log" | tail -3
gzip "$OUT/tiles_tests/"*.log
AB_TIMEOUT=220 AB_ORDER=off,on,on,off,off,on,on,off AB_VARIANTS='off: on:FUSEDMOE_W4_TILES=2' \
  bash bench/ab_device.sh tiles - 'deepseek-v3-tp1 1,8,64 mxfp4,nvfp4,mxfp4-fp8' \
  'qwen3-30b-a3b-tp1 8,64 mxfp4-fp8,nvfp4-w4a4'
