#!/usr/bin/env bash
# Two builds A/B: old = 84b8920's code, new = finalize_vec_kernel<V, false> without the bias / channel-scale loads it
# could never need (launch_finalize takes kExtras = true whenever there is a bias or CHANNEL dequant), and the
# backend's early-read condition in one helper. The finalize and 4-bit layer tests first.
# `bash bench/results/2026-11-28-h200-fin-dead-loads/run.sh` from the repository root on the device.
AB_TESTS='*FinalizePaths*:Formats/W4Gpu.*:AllFormatsActivations/LayerGpu.MatchesOracle/*' AB_TIMEOUT=150 \
AB_VARIANTS='old: new:' AB_VARIANT_BENCH='old=bench_old' \
  bash bench/ab_device.sh findead - 'qwen3-30b-a3b-tp1 8,64,4096 mxfp4' 'mixtral-8x7b 4096 bf16'
