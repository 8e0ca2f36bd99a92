#!/usr/bin/env bash
# The 4-bit mma kernel's 8-token tiles with their activations in shared memory (kSx, 0f8250e) against the register
# form (FUSEDMOE_W4_SMEM_X=0), same binary (bin/bench, bin/tests built from 0f8250e). From the repository root on the
# device; r5 is this exact command (r1-r4: earlier forms of the change, see README.md).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
timeout 250 compute-sanitizer --tool racecheck --error-exitcode 3 .devcarry/bin/tests \
  --gtest_filter='W4MmaStagesGpu.SharedMemoryActivationsBitwiseEqualToRegisters'
AB_ORDER=off,on,on,off,off,on AB_TESTS='W4MmaStagesGpu.*:Formats/W4Gpu.*:W4MmaActGpu.*:W4GpuEdge.*:Shapes/DecodeLayerW4Gpu.*' \
AB_MEMCHECK='W4MmaStagesGpu.SharedMemoryActivationsBitwiseEqualToRegisters' AB_TIMEOUT=280 \
AB_BENCH_ARGS='--check-tokens 2 --no-ceilings --stage-runs 2 --max-minutes 2' \
bash bench/ab_device.sh sxrule FUSEDMOE_W4_SMEM_X=0 'qwen3-30b-a3b-tp1 1,8,16,64 w4a8-int4,mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4' \
  'deepseek-v3-tp1 1,8,64 w4a8-int4,mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4' 'gpt-oss-120b 8,64 mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4'
