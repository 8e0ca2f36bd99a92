#!/usr/bin/env bash
# r7: the rule as committed (w4_gemm.cu launch_instance: under-one-wave 8-token grids launched without PDL, 3 stages
# where k >= 4096 on at most 16 warps per SM) - tests, memcheck, then the same-binary A/B against both switches off.
# `bash bench/results/2026-11-28-h200-w4-few-stages/run7.sh` from the repository root on the device.
set -u
AB_TESTS='W4MmaStages*:Formats/W4Gpu.*:*LayerGpu*:*DecodeLayer*:W4MmaAct*:ChainedLaunch*:*Graph*' \
AB_MEMCHECK='W4MmaStages*:Formats/W4Gpu.DecodeSizes*' AB_TIMEOUT=300 \
AB_ORDER=off,on,on,off,off,on,on,off AB_VARIANTS='off:FUSEDMOE_W4_FEW_NOPDL=0,FUSEDMOE_W4_FEW_STAGES=0 on:' \
  bash bench/ab_device.sh few7 - 'deepseek-v3-tp1 1 mxfp4,nvfp4,w4a8-int4,mxfp4-fp8,nvfp4-w4a4' \
  'qwen3-30b-a3b-tp1 2,3 mxfp4,nvfp4,w4a8-int4' 'gpt-oss-120b 1,2 mxfp4-fp8,nvfp4-w4a4'
