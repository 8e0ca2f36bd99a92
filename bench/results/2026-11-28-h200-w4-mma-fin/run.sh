#!/usr/bin/env bash
# GEMM2 with the top-k sum in the 4-bit mma kernel at up to 8 tokens (w4_gemm.cu kFin, w4_mma_gemm2_finalize;
# FUSEDMOE_W4_MMA_FIN=0: GEMM2 writing y, then the finalize kernel, as before). `bash
# bench/results/2026-11-28-h200-w4-mma-fin/run.sh` from the repository root on the device: tests, memcheck, then the
# same-binary A/B.
set -u
AB_TESTS='W4MmaFin*:Formats/W4Gpu.*:*LayerGpu*:*DecodeLayer*:ChainedLaunch*:W4MmaAct*' \
AB_MEMCHECK='W4MmaFin*' AB_TIMEOUT=420 \
AB_ORDER=off,on,on,off,off,on,on,off AB_VARIANTS='off:FUSEDMOE_W4_MMA_FIN=0 on:' \
  bash bench/ab_device.sh fin - 'deepseek-v3-tp1 1,8 mxfp4,nvfp4,w4a8-int4,mxfp4-fp8,nvfp4-w4a4' \
  'gpt-oss-120b 1,8 mxfp4,mxfp4-fp8,nvfp4-w4a4' 'qwen3-30b-a3b-tp1 8 mxfp4,nvfp4'
