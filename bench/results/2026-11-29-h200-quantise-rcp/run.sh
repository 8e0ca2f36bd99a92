#!/usr/bin/env bash
# Two quantiser changes, two builds and a switch interleaved on one GPU: `base` = 53a8ad9 (bin/bench_old), `new` =
# the change (bin/bench: the flat nvfp4 quantiser of bf16 rows, quantise_bf16_nvfp4_flat_kernel, and the per-token fp8
# 8-value step quant_row_rcp without a division per value), `noflat` = the change with FUSEDMOE_NVFP4_FLAT=0 (the
# block-per-row nvfp4 kernel; quant_row_rcp stays). First the tests reaching both (the new exhaustive device tests
# included) and a memcheck of the new quantiser test and the per-token fp8 gather / activation cases.
# `bash bench/results/2026-11-29-h200-quantise-rcp/run.sh` from the repository root on the device (the pack carried).
set -u
AB_TESTS='E2m1Device*:QuantiseNvfp4Gpu*:*QuantiseRows*:Cases/Gather*:Cases/Activation*:*Nvfp4*:*nvfp4*:*W4*:*DecodeLayer*:*PlanGather*:*fp8*' \
AB_MEMCHECK='QuantiseNvfp4Gpu*:Cases/GatherRowPaths*:Cases/ActivationRowPaths*:Cases/ActivationRowLanes*' AB_TIMEOUT=400 \
AB_VARIANTS='base: new: noflat:FUSEDMOE_NVFP4_FLAT=0' AB_VARIANT_BENCH='base=bench_old' \
AB_ORDER=base,new,noflat,noflat,new,base,base,new,noflat \
  bash bench/ab_device.sh rcp - 'deepseek-v3-tp1 1,8,4096 mxfp4-fp8,w4a8-int4,nvfp4-w4a4' \
  'qwen3-30b-a3b-tp1 1,8,4096 mxfp4-fp8,w4a8-int4,nvfp4-w4a4' 'gpt-oss-120b 1,8,4096 mxfp4-fp8,nvfp4-w4a4'
