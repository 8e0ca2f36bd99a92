#!/usr/bin/env bash
# r5: the shorter-k few-warp grids (gpt-oss-120b one token, Qwen3-30B-A3B two tokens) launched without programmatic
# serialisation (np2) or with 3 stages (s3), every k. `bash bench/results/2026-11-28-h200-w4-few-stages/run5.sh`.
set -u
AB_TIMEOUT=300 AB_ORDER=s2,np2,s3,s3,np2,s2,s2,np2,s3 \
AB_VARIANTS='s2:FUSEDMOE_W4_FEW_STAGES=2 np2:FUSEDMOE_W4_FEW_NOPDL=1 s3:FUSEDMOE_W4_FEW_STAGES=3' \
  bash bench/ab_device.sh few5 - 'gpt-oss-120b 1 mxfp4-fp8,nvfp4-w4a4' 'qwen3-30b-a3b-tp1 2 mxfp4,nvfp4,w4a8-int4'
