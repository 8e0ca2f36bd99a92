#!/usr/bin/env bash
# End of the fourth session of 2026-11-29, after the two-row-tile default (kRT = 2): the whole GPU suite, the 4-bit
# tests with FUSEDMOE_W4_RT2=0, memcheck of the stage and mid-batch tests. (The grid was not re-run: device time; the
# A/B in ../2026-11-29-h200-w4-rt2 timed the rule change on the same kernels.) From the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
cat .devcarry/bin/sha; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 240 .devcarry/bin/tests 2>&1 | grep -E "^\[  FAILED|PASSED|FAILED  \]|SKIPPED \]" | tail -8
F='W4MmaStagesGpu.*:Formats/W4Gpu.*:W4MmaActGpu.*:W4GpuEdge.*:Shapes/DecodeLayerW4Gpu.*'
FUSEDMOE_W4_RT2=0 timeout 90 .devcarry/bin/tests --gtest_filter="$F" 2>&1 | grep -E "^\[  FAILED|PASSED|FAILED  \]" | tail -4
S='W4MmaStagesGpu.SharedMemoryActivationsBitwiseEqualToRegisters:Formats/W4Gpu.MidBatchMatchesOracle/*'
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 .devcarry/bin/tests --gtest_filter="$S" 2>&1 | tail -2
