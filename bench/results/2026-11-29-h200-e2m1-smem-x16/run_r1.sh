#!/usr/bin/env bash
# The e2m1 (MXFP4 / NVFP4) lean 16-token tiles with their activations in shared memory (kSx) against the register form,
# same binary (bin/bench, bin/tests of the commit in bin/sha): variants off (FUSEDMOE_W4_SMEM_X=0: registers
# everywhere), on (the default: kSx at k <= 2048 for e2m1) and all (FUSEDMOE_W4_SMEM_X=2: kSx at every k, here
# gpt-oss-120b's k = 2880). Points at 9-15 expected rows per expert (the 16-token tile). From the repository root on
# the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
F='W4MmaStagesGpu.SharedMemoryActivationsBitwiseEqualToRegisters'
for tool in racecheck synccheck; do
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 .devcarry/bin/tests --gtest_filter="$F" 2>&1 | tail -2
  echo "$tool rc=${PIPESTATUS[0]}"
done
AB_VARIANTS='off:FUSEDMOE_W4_SMEM_X=0 on: all:FUSEDMOE_W4_SMEM_X=2' AB_ORDER=off,on,all,all,on,off \
AB_TESTS='W4MmaStagesGpu.*:Formats/W4Gpu.*:W4MmaActGpu.*:W4GpuEdge.*:Shapes/DecodeLayerW4Gpu.*' \
AB_MEMCHECK="$F" AB_TIMEOUT=280 AB_BENCH_ARGS='--check-tokens 2 --no-ceilings --stage-runs 2 --max-minutes 2' \
bash bench/ab_device.sh sx16 - 'qwen3-30b-a3b-tp1 160,192,224 mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4' \
  'deepseek-v3-tp1 320,384 mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4' 'gpt-oss-120b 320,384 mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4'
