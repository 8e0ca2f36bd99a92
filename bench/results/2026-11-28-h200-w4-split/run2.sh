#!/usr/bin/env bash
# r2: the kept form (NVFP4 only): same-binary A/B of the split (FUSEDMOE_W4_SPLIT=0: one k range), then
# bench/session_end.sh's suite, memcheck and the decode grid (1 / 8 / 64 tokens) against session-end-6.
# `bash bench/results/2026-11-28-h200-w4-split/run2.sh` from the repository root on the device.
tar xf .devcarry/pack/bins.tgz -C .devcarry
AB_TIMEOUT=150 AB_VARIANTS='one:FUSEDMOE_W4_SPLIT=0 split:' \
  bash bench/ab_device.sh split2 - 'gpt-oss-120b 1,2 nvfp4-w4a4,nvfp4,mxfp4-fp8'
SE_STEPS='suite memcheck grid' SE_M=1,8,64 \
SE_MEMCHECK='W4MmaActGpu.*:Formats/W4Gpu.DecodeSizesMatchOracle/*:*FinalizePaths*:*ActivationNvfp4Paths*lanes*' \
SE_OLD=bench/results/2026-11-28-h200-session-end-6/grid/fusedmoe-bench.json.gz bash bench/session_end.sh session-end-7
