#!/usr/bin/env bash
# The per-token fp8 (ROW) gathers with a thread per 8 columns at few rows (permute.cu row_gather_wide;
# FUSEDMOE_ROW_GATHER_WIDE=0: 256 threads as before). `bash bench/results/2026-11-28-h200-row-gather-wide/run.sh` from
# the repository root on the device: tests, memcheck, then the same-binary A/B.
set -u
tar xf .devcarry/pack/bins.tgz -C .devcarry
AB_TESTS='*GatherRowPaths*:*PlanGather*:Formats/W4Gpu.*:*LayerGpu*fp8_channel*:*LayerGpu*mxfp4*:*LayerGpu*w4a8*:*GatherTokenPaths*' \
AB_MEMCHECK='*GatherRowPaths*:*PlanGather*' AB_TIMEOUT=200 \
AB_ORDER=off,on,on,off,off,on,on,off AB_VARIANTS='off:FUSEDMOE_ROW_GATHER_WIDE=0 on:' \
  bash bench/ab_device.sh rgw - 'deepseek-v3-tp1 1,8 mxfp4-fp8,w4a8-int4,fp8-channel' 'gpt-oss-120b 1,8 mxfp4-fp8' \
  'qwen3-30b-a3b-tp1 8,64 mxfp4-fp8,w4a8-int4'
