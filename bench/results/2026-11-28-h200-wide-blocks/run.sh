#!/usr/bin/env bash
# 1024-thread blocks for two more decode-size kernels before an under-one-wave GEMM: the bf16 / static-fp8 plan +
# gather (permute.cu vec_gather_wide; FUSEDMOE_VEC_GATHER_WIDE=0: 256) and W4A4's lanes activation
# (FUSEDMOE_NVFP4_LANES_WIDE=0: 256). `bash bench/results/2026-11-28-h200-wide-blocks/run.sh` from the repository
# root on the device: tests, memcheck, then a same-binary A/B of three variants (on = both, g0 / a0 = one off).
set -u
tar xf .devcarry/pack/bins.tgz -C .devcarry
AB_TESTS='*PlanGather*:*GatherVecPaths*:*ActivationNvfp4Paths*:Formats/W4Gpu.*:*LayerGpu*mxfp4*:*LayerGpu*nvfp4*:*LayerGpu*bf16*' \
AB_MEMCHECK='*PlanGather*:*ActivationNvfp4Paths*' AB_TIMEOUT=220 \
AB_VARIANTS='g0:FUSEDMOE_VEC_GATHER_WIDE=0 a0:FUSEDMOE_NVFP4_LANES_WIDE=0 on:' AB_BASE=on \
  bash bench/ab_device.sh wide - 'deepseek-v3-tp1 1,8 mxfp4,nvfp4-w4a4' 'gpt-oss-120b 1,8 nvfp4-w4a4,mxfp4' \
  'qwen3-30b-a3b-tp1 8 mxfp4,nvfp4-w4a4'
