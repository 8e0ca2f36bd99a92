#!/usr/bin/env bash
# r2, review mend: pack8_row_codes calls quant_tensor_rcp (quant_row_rcp was a copy of it; per-token fp8 kernels
# SASS-identical) and nvfp4_block_values takes its reciprocal after the zero-scale branch. `new` = the mend (bin/bench),
# `base` = 011d9c6 (bin/bench_old). Tests reaching both quantisers first, memcheck of the nvfp4 cases.
# `bash bench/results/2026-11-29-h200-quantise-rcp/run2.sh` from the repository root on the device (pack carried).
set -u
AB_TESTS='E2m1Device*:QuantiseNvfp4Gpu*:*QuantiseRows*:Cases/Gather*:Cases/Activation*:*Nvfp4*:*nvfp4*:*W4*:*DecodeLayer*:*PlanGather*' \
AB_MEMCHECK='QuantiseNvfp4Gpu*:Cases/GatherNvfp4Paths*:Cases/ActivationNvfp4Paths*' AB_TIMEOUT=300 \
AB_VARIANTS='base: new:' AB_VARIANT_BENCH='base=bench_old' AB_ORDER=base,new,new,base,base,new \
  bash bench/ab_device.sh mend - 'qwen3-30b-a3b-tp1 1,8,4096 nvfp4-w4a4,mxfp4-fp8' 'gpt-oss-120b 1,4096 nvfp4-w4a4'
