#!/usr/bin/env bash
# r4: GEMM1 launched without programmatic serialisation (FUSEDMOE_W4_FEW_NOPDL=1: it starts once the gather has ended,
# its blocks not placed beside the gather's) with 2 and 3 stages, k >= 4096, against the chained 2 / 3 stages.
# `bash bench/results/2026-11-28-h200-w4-few-stages/run4.sh` from the repository root on the device.
set -u
AB_TIMEOUT=300 AB_ORDER=s2,s3k,np2k,np3k,np3k,np2k,s3k,s2,s2,s3k,np2k,np3k \
AB_VARIANTS='s2:FUSEDMOE_W4_FEW_STAGES=2 s3k:FUSEDMOE_W4_FEW_STAGES=3,FUSEDMOE_W4_FEW_MIN_K=4096 np2k:FUSEDMOE_W4_FEW_NOPDL=1,FUSEDMOE_W4_FEW_MIN_K=4096 np3k:FUSEDMOE_W4_FEW_NOPDL=1,FUSEDMOE_W4_FEW_STAGES=3,FUSEDMOE_W4_FEW_MIN_K=4096' \
  bash bench/ab_device.sh few4 - 'deepseek-v3-tp1 1 mxfp4,nvfp4,mxfp4-fp8'
