#!/usr/bin/env bash
# r2: which GEMMs gain - 3 / 4 stages only where k >= 4096 (FUSEDMOE_W4_FEW_MIN_K=4096: DeepSeek-V3 TP1's GEMM1 at one
# token) against all few-warp grids. `bash bench/results/2026-11-28-h200-w4-few-stages/run2.sh` on the device.
set -u
AB_TIMEOUT=400 AB_ORDER=s2,s3,s3k,s4k,s4k,s3k,s3,s2,s2,s3,s3k,s4k \
AB_VARIANTS='s2:FUSEDMOE_W4_FEW_STAGES=2 s3:FUSEDMOE_W4_FEW_STAGES=3 s3k:FUSEDMOE_W4_FEW_STAGES=3,FUSEDMOE_W4_FEW_MIN_K=4096 s4k:FUSEDMOE_W4_FEW_STAGES=4,FUSEDMOE_W4_FEW_MIN_K=4096' \
  bash bench/ab_device.sh few2 - 'deepseek-v3-tp1 1 mxfp4,nvfp4,w4a8-int4,mxfp4-fp8,nvfp4-w4a4' \
  'gpt-oss-120b 1 mxfp4-fp8,nvfp4-w4a4' 'qwen3-30b-a3b-tp1 2 mxfp4,mxfp4-fp8'
