#!/usr/bin/env bash
# kSx with one mbarrier per ring buffer instead of a block barrier per stage (mbarrier.diff on 103d290), against the
# register form (FUSEDMOE_W4_SMEM_X=0), 0f8250e's block-barrier form (bin/bench_sync) and the mbarrier form at every k
# (FUSEDMOE_W4_SMEM_X=2). From the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
timeout 250 compute-sanitizer --tool racecheck --error-exitcode 3 .devcarry/bin/tests --gtest_filter='W4MmaStagesGpu.SharedMemoryActivationsBitwiseEqualToRegisters'
timeout 250 compute-sanitizer --tool synccheck --error-exitcode 3 .devcarry/bin/tests --gtest_filter='W4MmaStagesGpu.SharedMemoryActivationsBitwiseEqualToRegisters'
AB_VARIANTS='reg:FUSEDMOE_W4_SMEM_X=0 sync: mbar: mball:FUSEDMOE_W4_SMEM_X=2' AB_VARIANT_BENCH='sync=bench_sync' \
AB_ORDER=reg,sync,mbar,mball,mball,mbar,sync,reg AB_TESTS='W4MmaStagesGpu.*:Formats/W4Gpu.DecodeSizes*:Formats/W4Gpu.Ragged*:W4MmaActGpu.*' \
AB_MEMCHECK='W4MmaStagesGpu.SharedMemoryActivationsBitwiseEqualToRegisters' AB_TIMEOUT=280 \
AB_BENCH_ARGS='--check-tokens 2 --no-ceilings --stage-runs 2 --max-minutes 2' \
bash bench/ab_device.sh mbar - 'qwen3-30b-a3b-tp1 8,64 w4a8-int4,mxfp4,nvfp4-w4a4' 'deepseek-v3-tp1 8,64 w4a8-int4,mxfp4,nvfp4' \
  'gpt-oss-120b 8,64 nvfp4,nvfp4-w4a4'
