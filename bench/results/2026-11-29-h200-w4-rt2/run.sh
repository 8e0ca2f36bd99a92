#!/usr/bin/env bash
# The e2m1 shared-memory 16- / 32-token tiles with two 16-row weight tiles per warp on one set of activation fragments
# (kRT = 2; FUSEDMOE_W4_RT2=1) against one (the default), same binary (bin/bench, bin/tests of the commit in bin/sha):
# the 4-bit tests with the switch on, memcheck / racecheck of the stage test with it, then the A/B. From the repository
# root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
F='W4MmaStagesGpu.*:Formats/W4Gpu.*:W4MmaActGpu.*:W4GpuEdge.*:Shapes/DecodeLayerW4Gpu.*'
FUSEDMOE_W4_RT2=1 timeout 150 .devcarry/bin/tests --gtest_filter="$F" 2>&1 | grep -E "^\[  FAILED|PASSED|FAILED  \]|SKIPPED \]" | tail -6
S='W4MmaStagesGpu.SharedMemoryActivationsBitwiseEqualToRegisters:Formats/W4Gpu.MidBatchMatchesOracle/*'
FUSEDMOE_W4_RT2=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 .devcarry/bin/tests --gtest_filter="$S" 2>&1 | tail -2
FUSEDMOE_W4_RT2=1 timeout 150 compute-sanitizer --tool racecheck --error-exitcode 3 .devcarry/bin/tests --gtest_filter='W4MmaStagesGpu.SharedMemoryActivationsBitwiseEqualToRegisters' 2>&1 | tail -1
AB_VARIANTS='rt1: rt2:FUSEDMOE_W4_RT2=1' AB_ORDER=rt1,rt2,rt2,rt1 AB_TIMEOUT=200 \
AB_BENCH_ARGS='--check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 2' \
bash bench/ab_device.sh rt2 - 'qwen3-30b-a3b-tp1 160,256,384 mxfp4,nvfp4,nvfp4-w4a4' \
  'deepseek-v3-tp1 320,512,768 mxfp4,nvfp4' 'gpt-oss-120b 320,512,768 mxfp4,nvfp4'
