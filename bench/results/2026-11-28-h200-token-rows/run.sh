#!/usr/bin/env bash
# Two builds A/B: old = 9722ef9, new = the finalize's bias / channel-scale loads issued with each slot batch's y loads
# (finalize_vec_kernel<V, kExtras>) and the token-major gathers' slot rows loaded at the top of a token (TokenRows).
# The finalize / gather path tests, the layer tests and a memcheck first.
# `bash bench/results/2026-11-28-h200-token-rows/run.sh` from the repository root on the device.
AB_TESTS='*FinalizePaths*:*Gather*Paths*:AllFormatsActivations/LayerGpu.MatchesOracle/*:Formats/W4Gpu.*' \
AB_MEMCHECK='*FinalizePaths*:*GatherTokenPaths*' AB_TIMEOUT=200 \
AB_VARIANTS='old: new:' AB_VARIANT_BENCH='old=bench_old' \
  bash bench/ab_device.sh tokenrows - 'gpt-oss-120b 8,64,1024,4096 mxfp4' 'qwen3-30b-a3b-tp1 1024,4096 mxfp4,bf16' \
  'deepseek-v3-tp1 4096 mxfp4' 'mixtral-8x7b 4096 bf16'
