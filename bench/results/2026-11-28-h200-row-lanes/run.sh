#!/usr/bin/env bash
# Per-token fp8 (ROW) activation at up to 64 rows on one output per thread (activation.cu activation_row_lanes_kernel;
# FUSEDMOE_ROW_LANES=0: the vector / cluster kernels as before). `bash bench/results/2026-11-28-h200-row-lanes/run.sh`
# from the repository root on the device: tests, memcheck, then the same-binary A/B.
set -u
tar xf .devcarry/pack/bins.tgz -C .devcarry
AB_TESTS='*ActivationRow*:Formats/W4Gpu.*:*LayerGpu*fp8_channel*:*LayerGpu*mxfp4*:*LayerGpu*w4a8*:ChainedLaunch*' \
AB_MEMCHECK='*ActivationRowLanes*' AB_TIMEOUT=200 \
AB_ORDER=off,on,on,off,off,on,on,off AB_VARIANTS='off:FUSEDMOE_ROW_LANES=0 on:' \
  bash bench/ab_device.sh rl - 'gpt-oss-120b 1,8 mxfp4-fp8' 'deepseek-v3-tp1 1,8 mxfp4-fp8,w4a8-int4,fp8-channel' \
  'qwen3-30b-a3b-tp1 8,64 mxfp4-fp8,w4a8-int4'
