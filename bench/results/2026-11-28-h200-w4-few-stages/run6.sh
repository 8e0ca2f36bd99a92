#!/usr/bin/env bash
# r6: the candidate rule - 3 stages where k >= 4096 on grids of at most 16 warps per SM, and the mma GEMMs on grids of
# at most FUSEDMOE_W4_FEW_WARPS (16 / 24 / 32) warps per SM launched without programmatic serialisation - against the
# defaults, over the points those grids reach. `bash bench/results/2026-11-28-h200-w4-few-stages/run6.sh`.
set -u
C='FUSEDMOE_W4_FEW_STAGES=3,FUSEDMOE_W4_FEW_MIN_K=4096,FUSEDMOE_W4_FEW_NOPDL=1'
AB_TIMEOUT=400 AB_ORDER=s2,c16,c24,c32,c32,c24,c16,s2,s2,c16,c24,c32 \
AB_VARIANTS="s2:FUSEDMOE_W4_FEW_STAGES=2 c16:$C,FUSEDMOE_W4_FEW_WARPS=16 c24:$C,FUSEDMOE_W4_FEW_WARPS=24 c32:$C,FUSEDMOE_W4_FEW_WARPS=32" \
  bash bench/ab_device.sh few6 - 'deepseek-v3-tp1 1 mxfp4,nvfp4,w4a8-int4,mxfp4-fp8' \
  'qwen3-30b-a3b-tp1 2,3 mxfp4,nvfp4,mxfp4-fp8' 'gpt-oss-120b 1,2 mxfp4,mxfp4-fp8,nvfp4-w4a4'
