#!/usr/bin/env bash
# r3: is the gain the bytes in flight or the blocks beside GEMM1? The 2-stage instance with 56 KB of shared memory per
# block on the same grids (FUSEDMOE_W4_FEW_HOG=1: no block of the next kernel fits beside it, as with the 3-stage
# instance's ~120 registers) against 2 and 3 stages, k >= 4096. `bash bench/results/2026-11-28-h200-w4-few-stages/run3.sh`.
set -u
AB_TIMEOUT=300 AB_ORDER=s2,s3k,hogk,hogk,s3k,s2,s2,s3k,hogk \
AB_VARIANTS='s2:FUSEDMOE_W4_FEW_STAGES=2 s3k:FUSEDMOE_W4_FEW_STAGES=3,FUSEDMOE_W4_FEW_MIN_K=4096 hogk:FUSEDMOE_W4_FEW_HOG=1,FUSEDMOE_W4_FEW_MIN_K=4096' \
  bash bench/ab_device.sh few3 - 'deepseek-v3-tp1 1 mxfp4,nvfp4,w4a8-int4,mxfp4-fp8,nvfp4-w4a4'
