#!/usr/bin/env bash
# Same-binary A/B of the mma GEMM1 + activation with bf16 rows for per-token fp8 / nvfp4 activations (on) against
# h + the activation kernel (FUSEDMOE_W4_MMA_ACT_ROWS=0, off); binaries built from 47a7273 + mma_act_rows.diff, carried.
AB_TESTS='W4MmaActGpu.*:Formats/W4Gpu.DecodeSizes*:*Stages*:Shapes/DecodeLayerW4Gpu.*:W4WgmmaActGpu.*' AB_MEMCHECK='W4MmaActGpu.*' \
AB_TIMEOUT=280 bash bench/ab_device.sh actrows FUSEDMOE_W4_MMA_ACT_ROWS=0 'deepseek-v3-tp1 1,8,64 mxfp4-fp8,nvfp4-w4a4' \
  'qwen3-30b-a3b-tp1 8,64 mxfp4-fp8,nvfp4-w4a4' 'gpt-oss-120b 8,64 nvfp4-w4a4'
