#!/usr/bin/env bash
# Same-binary A/B: off = FUSEDMOE_WARP_ROWS=0 (activation_row_vec_kernel, a block per row), on = activation_row_warp_kernel
# (a warp per row) for ROW quantisation of fp32 h - W4A8 at many rows, MXFP4-fp8 / W4A8 on the mma way at 512+ slots.
# (The switch also turns off the bf16-row warp quantisers of 2026-11-27, which none of these points takes.)
# The activation / finalize path tests, the 4-bit and layer tests and a memcheck first.
# `bash bench/results/2026-11-28-h200-act-row-warp/run.sh` from the repository root on the device.
AB_TESTS='*ActivationRow*:*FinalizePaths*:Formats/W4Gpu.*:AllFormatsActivations/LayerGpu.MatchesOracle/*' \
AB_MEMCHECK='*ActivationRowWarpPaths*silu*' AB_TIMEOUT=200 \
  bash bench/ab_device.sh actwarp FUSEDMOE_WARP_ROWS=0 'qwen3-30b-a3b-tp1 64 mxfp4-fp8,w4a8-int4' \
  'qwen3-30b-a3b-tp1 1024,4096 w4a8-int4' 'deepseek-v3-tp8 1024,4096 w4a8-int4'
