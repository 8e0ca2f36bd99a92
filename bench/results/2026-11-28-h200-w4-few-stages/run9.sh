#!/usr/bin/env bash
# r9: review mend (the launch rule's SM count from the caller - the backend's, read once - instead of two CUDA
# runtime queries per launch; launch_unchained / launch_chained_clusters sharing their config; device code
# SASS-identical): the tests and a short same-binary A/B against both switches off.
# `bash bench/results/2026-11-28-h200-w4-few-stages/run9.sh` from the repository root on the device.
set -u
AB_TESTS='W4MmaStages*:Formats/W4Gpu.*:*LayerGpu*:*DecodeLayer*:W4MmaAct*:ChainedLaunch*:*Graph*:*Split*' \
AB_TIMEOUT=150 AB_ORDER=off,on,on,off AB_VARIANTS='off:FUSEDMOE_W4_FEW_NOPDL=0,FUSEDMOE_W4_FEW_STAGES=0 on:' \
  bash bench/ab_device.sh few9 - 'deepseek-v3-tp1 1 mxfp4' 'qwen3-30b-a3b-tp1 2 nvfp4'
