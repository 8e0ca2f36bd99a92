#!/usr/bin/env bash
# Session end (sixth session of 2026-11-28): first a same-binary A/B of the one-token W4A4 layer's quantisation of its
# staged activation unrolled (FUSEDMOE_DL_NVFP4_UNROLLED=0: rolled, as before); then the whole GPU suite, memcheck of
# the decode-size 4-bit tests and the W4A4 lanes activation tests, the 4-bit tests under the decode switches, and the
# 4-bit grid compared with session-end-5.
# `bash bench/results/2026-11-28-h200-session-end-6/run.sh` from the repository root on the device.
tar xf .devcarry/pack/bins.tgz -C .devcarry
AB_TIMEOUT=120 AB_VARIANTS='rolled:FUSEDMOE_DL_NVFP4_UNROLLED=0 unrolled:' \
  bash bench/ab_device.sh unrolled - 'qwen3-30b-a3b-tp1 1 nvfp4-w4a4,nvfp4'
W4='Formats/W4Gpu.*:W4GpuEdge.*:W4MmaActGpu.*:AllFormatsActivations/LayerGpu.MatchesOracle/*fp4*:Shapes/DecodeLayerW4Gpu.*'
SE_MEMCHECK='W4MmaActGpu.*:Formats/W4Gpu.DecodeSizesMatchOracle/*:*FinalizePaths*:*ActivationNvfp4Paths*lanes*:Shapes/DecodeLayerW4Gpu.*w4a4*' \
SE_SWITCHES="FUSEDMOE_W4_LEAN=0@$W4 FUSEDMOE_W4_MMA_ACT=0@$W4 FUSEDMOE_NVFP4_LANES=0@$W4:*ActivationNvfp4Paths* FUSEDMOE_DL_NVFP4_UNROLLED=0@Shapes/DecodeLayerW4Gpu.*" \
SE_OLD=bench/results/2026-11-28-h200-session-end-5/grid/fusedmoe-bench.json.gz bash bench/session_end.sh session-end-6
