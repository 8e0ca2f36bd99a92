#!/usr/bin/env bash
# Same-binary A/B: off = FUSEDMOE_W4_MMA_ACT=0 (GEMM1 writes fp32 h, then the activation kernel), on = the activation
# in the 4-bit mma GEMM1's epilogue (w4_gemm.cu kAct). The new bitwise test, the 4-bit decode / layer tests and a
# memcheck first. `bash bench/results/2026-11-28-h200-w4-mma-act/run.sh` from the repository root on the device.
AB_TESTS='W4MmaActGpu.*:Formats/W4Gpu.*:W4GpuEdge.*:AllFormatsActivations/LayerGpu.MatchesOracle/*fp4*' \
AB_MEMCHECK='W4MmaActGpu.*:Formats/W4Gpu.DecodeSizesMatchOracle/*' AB_TIMEOUT=170 \
  bash bench/ab_device.sh mmaact FUSEDMOE_W4_MMA_ACT=0 'qwen3-30b-a3b-tp1 8,64 mxfp4,nvfp4' 'gpt-oss-120b 8,64 mxfp4,nvfp4' \
  'deepseek-v3-tp1 1,8,64 mxfp4,nvfp4'
