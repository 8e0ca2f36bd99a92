#!/usr/bin/env bash
# GEMM2's weight tiles asked into L2 before its wait (w4_gemm.cu kEarly twins; FUSEDMOE_W4_PREFETCH=0: off).
# `bash bench/results/2026-11-28-h200-w4-prefetch/run.sh PHASE` from the repository root on the device.
# r1: tests (also with the one-token chain, FUSEDMOE_DECODE_LAYER=0), memcheck, one-token A/B (the chain's points).
# r2: 8 / 64-token A/B.
set -u
tar xf .devcarry/pack/bins.tgz -C .devcarry
T='W4EarlyStartGpu.*:*W4Gpu*:W4MmaActGpu.*:*FinalizePaths*:*DecodeLayerW4*:*LayerGpu*fp4*:*LayerGpu*w4a8*'
case ${1:-r1} in
r1)
  mkdir -p "$OUT/chain_tests"
  FUSEDMOE_DECODE_LAYER=0 timeout 200 .devcarry/bin/tests --gtest_filter='*DecodeLayerW4*:W4EarlyStartGpu.*' \
    > "$OUT/chain_tests/log.txt" 2>&1
  echo "one-token chain tests rc=$?"; grep -E '^\[  FAILED|PASSED|FAILED  \]|SKIPPED \]' "$OUT/chain_tests/log.txt" | tail -5
  AB_TESTS=$T AB_MEMCHECK='W4EarlyStartGpu.*:Formats/W4Gpu.DecodeSizesMatchOracle/*' AB_TIMEOUT=200 \
  AB_ORDER=off,on,on,off,off,on,on,off AB_VARIANTS='off:FUSEDMOE_W4_PREFETCH=0 on:' \
    bash bench/ab_device.sh pf1 - 'deepseek-v3-tp1 1 mxfp4,nvfp4,mxfp4-fp8,w4a8-int4' \
    'gpt-oss-120b 1 mxfp4-fp8,nvfp4-w4a4'
  ;;
r2)  # prefetching blocks limited to those expected early (and ~20 MB of tiles)
  AB_TESTS='W4EarlyStartGpu.*:Formats/W4Gpu.DecodeSizesMatchOracle/*' AB_TIMEOUT=200 \
  AB_ORDER=off,on,on,off,off,on,on,off AB_VARIANTS='off:FUSEDMOE_W4_PREFETCH=0 on:' \
    bash bench/ab_device.sh pf2 - 'deepseek-v3-tp1 1,8 mxfp4,nvfp4,mxfp4-fp8,w4a8-int4' \
    'gpt-oss-120b 1,8 mxfp4-fp8,mxfp4'
  ;;
esac
