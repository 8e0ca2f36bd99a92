#!/usr/bin/env bash
# r2: the 16- / 32-token tiles with their activations in shared memory (kSx) for every format at every k, checked
# (tests, sanitizers) and timed twice: (a) the 16-token tile's rule against the register form at the long-k points of
# r1 (FUSEDMOE_W4_SMEM_X=0 against the default); (b) where the mma kernel hands over to the large-batch wgmma kernels:
# the default (wgmma from 16 expected rows per expert) against FUSEDMOE_W4_WGMMA_MIN_ROWS=33 (the mma kernel's 16- /
# 32-token kSx tiles up to 32 rows). Same binary (bin/bench, bin/tests of the commit in bin/sha); from the repository
# root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
F='W4MmaStagesGpu.SharedMemoryActivationsBitwiseEqualToRegisters'
for tool in racecheck synccheck; do
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 .devcarry/bin/tests --gtest_filter="$F" 2>&1 | tail -2
  echo "$tool rc=${PIPESTATUS[0]}"
done
AB_ORDER=off,on,on,off AB_TESTS='W4MmaStagesGpu.*:Formats/W4Gpu.*:W4MmaActGpu.*:W4GpuEdge.*:Shapes/DecodeLayerW4Gpu.*' \
AB_MEMCHECK="$F" AB_TIMEOUT=200 AB_BENCH_ARGS='--check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 2' \
bash bench/ab_device.sh sx16b FUSEDMOE_W4_SMEM_X=0 'deepseek-v3-tp1 384 mxfp4,nvfp4' 'gpt-oss-120b 384 mxfp4,nvfp4'
AB_VARIANTS='wgmma: mma:FUSEDMOE_W4_WGMMA_MIN_ROWS=33' AB_ORDER=wgmma,mma,mma,wgmma AB_TIMEOUT=200 \
AB_BENCH_ARGS='--check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 2' \
bash bench/ab_device.sh wgrows - 'qwen3-30b-a3b-tp1 256,384,512 w4a8-int4,mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4' \
  'deepseek-v3-tp1 512,768 w4a8-int4,mxfp4,nvfp4,nvfp4-w4a4' 'gpt-oss-120b 512,768 mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4'
