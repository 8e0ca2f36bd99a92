#!/usr/bin/env bash
# r8: after the plain launch moved from <<<>>> to launch_unchained (cudaLaunchKernelEx without the PDL attribute; the
# source rule forbids <<<>>>): the tests again and the same-binary A/B against both switches off, on a few points.
# `bash bench/results/2026-11-28-h200-w4-few-stages/run8.sh` from the repository root on the device.
set -u
AB_TESTS='W4MmaStages*:Formats/W4Gpu.*:*LayerGpu*:*DecodeLayer*:W4MmaAct*:ChainedLaunch*:*Graph*' \
AB_TIMEOUT=200 AB_ORDER=off,on,on,off,off,on AB_VARIANTS='off:FUSEDMOE_W4_FEW_NOPDL=0,FUSEDMOE_W4_FEW_STAGES=0 on:' \
  bash bench/ab_device.sh few8 - 'deepseek-v3-tp1 1 mxfp4,w4a8-int4' 'qwen3-30b-a3b-tp1 2 mxfp4,nvfp4'
