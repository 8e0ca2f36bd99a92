#!/usr/bin/env bash
# W4A4's fused plan + gather on 16 lanes per 16-wide block at up to 64 slots (permute.cu plan_gather_nvfp4_lanes_kernel;
# FUSEDMOE_NVFP4_GATHER_LANES=0: the vector kernel as before). `bash bench/results/2026-11-28-h200-nvfp4-gather-lanes/run.sh`
# from the repository root on the device: tests, memcheck, then the same-binary A/B (r1); `run.sh r2`: one token
# without the CUDA graph (--graph-max-m 0), and with one input set (--rotate 1).
set -u
tar xf .devcarry/pack/bins.tgz -C .devcarry
if [ "${1:-r1}" = r2 ]; then
  AB_TIMEOUT=120 AB_ORDER=off,on,on,off,off,on AB_VARIANTS='off:FUSEDMOE_NVFP4_GATHER_LANES=0 on:' \
  AB_BENCH_ARGS='--check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 0.2 --graph-max-m 0' \
    bash bench/ab_device.sh ngl_nograph - 'gpt-oss-120b 1 nvfp4-w4a4' 'deepseek-v3-tp1 1 nvfp4-w4a4'
  AB_TIMEOUT=120 AB_ORDER=off,on,on,off,off,on AB_VARIANTS='off:FUSEDMOE_NVFP4_GATHER_LANES=0 on:' \
  AB_BENCH_ARGS='--check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 0.2 --rotate 1' \
    bash bench/ab_device.sh ngl_rot1 - 'gpt-oss-120b 1 nvfp4-w4a4'
  exit 0
fi
AB_TESTS='*PlanGather*:*GatherNvfp4Paths*:Formats/W4Gpu.*:*LayerGpu*nvfp4*:*DecodeLayerW4*' \
AB_MEMCHECK='*PlanGather*' AB_TIMEOUT=200 \
AB_ORDER=off,on,on,off,off,on,on,off AB_VARIANTS='off:FUSEDMOE_NVFP4_GATHER_LANES=0 on:' \
  bash bench/ab_device.sh ngl - 'deepseek-v3-tp1 1,8 nvfp4-w4a4' 'gpt-oss-120b 1,8 nvfp4-w4a4' \
  'qwen3-30b-a3b-tp1 8 nvfp4-w4a4'
