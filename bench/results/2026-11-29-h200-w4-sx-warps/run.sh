#!/usr/bin/env bash
# The shared-memory (kSx) 16- / 32-token tiles on 8-warp blocks (128 weight rows share one copy of the tile's activations)
# against 4-warp blocks: FUSEDMOE_W4_SX_WARPS=4 / 8, same binary (bin/bench, bin/tests of the commit in bin/sha), after
# the 4-bit tests, racecheck / memcheck of the shared-memory activation test (both block sizes). From the repository
# root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
F='W4MmaStagesGpu.SharedMemoryActivationsBitwiseEqualToRegisters'
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 3 .devcarry/bin/tests --gtest_filter="$F" 2>&1 | tail -2
echo "racecheck rc=${PIPESTATUS[0]}"
AB_VARIANTS='w4:FUSEDMOE_W4_SX_WARPS=4 w8:FUSEDMOE_W4_SX_WARPS=8' AB_ORDER=w4,w8,w8,w4 \
AB_TESTS='W4MmaStagesGpu.*:Formats/W4Gpu.*:W4MmaActGpu.*:W4GpuEdge.*:Shapes/DecodeLayerW4Gpu.*' AB_MEMCHECK="$F" \
AB_TIMEOUT=200 AB_BENCH_ARGS='--check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 2' \
bash bench/ab_device.sh sxw - 'qwen3-30b-a3b-tp1 160,224,256,384 w4a8-int4,mxfp4,nvfp4' \
  'deepseek-v3-tp1 320,512,768 w4a8-int4,mxfp4,nvfp4' 'gpt-oss-120b 320,512,768 mxfp4,nvfp4'
