#!/usr/bin/env bash
# The 4-bit mma kernel's early start (Params::early, FUSEDMOE_W4_EARLY): old = 4dfc837's build; e0 / e1 / e2 = this
# change with the switch at 0 (waits first, as before), 1 (the expert lookup before the wait), default 2 (also the
# first stage's weight rows asked into L2 before it). Then the one-token layers against the kernel chain
# (FUSEDMOE_DECODE_LAYER=0) at M = 1. The 4-bit tests three times over and a memcheck first.
# `bash bench/results/2026-11-28-h200-w4-early/run.sh` from the repository root on the device.
tar xf .devcarry/pack/bins.tgz -C .devcarry
W4='*FinalizePaths*:Formats/W4Gpu.*:W4GpuEdge.*:AllFormatsActivations/LayerGpu.MatchesOracle/*fp4*:AllFormatsActivations/LayerGpu.MatchesOracle/*w4a8*:Shapes/DecodeLayerW4Gpu.*:*W4Mma*:*W4EarlyStart*'
timeout 300 .devcarry/bin/tests --gtest_filter="$W4" --gtest_repeat=3 > /tmp/w4_early_repeat.log 2>&1
echo "repeat rc=$?"; grep -E "^\[  FAILED|PASSED  \]|FAILED  \]" /tmp/w4_early_repeat.log | sort | uniq -c | tail -8
# GEMM1 early too: with the plan in its own kernel (beyond 32 slots under FUSEDMOE_WIDE_PLAN=0: M = 37 x top-2)
FUSEDMOE_WIDE_PLAN=0 timeout 200 .devcarry/bin/tests --gtest_filter='Formats/W4Gpu.*:*MatchesOracle/*fp4*:*MatchesOracle/*w4a8*' --gtest_repeat=2 > /tmp/w4_early_plan.log 2>&1
echo "separate-plan repeat rc=$?"; grep -E "^\[  FAILED|PASSED  \]|FAILED  \]" /tmp/w4_early_plan.log | sort | uniq -c | tail -8
mkdir -p "$OUT/rep" && gzip -c /tmp/w4_early_plan.log > "$OUT/rep/separate_plan.log.gz"
mkdir -p "$OUT/rep" && gzip -c /tmp/w4_early_repeat.log > "$OUT/rep/repeat.log.gz"
AB_MEMCHECK='Formats/W4Gpu.DecodeSizesMatchOracle/*' AB_TIMEOUT=200 \
AB_VARIANTS='old: e0:FUSEDMOE_W4_EARLY=0 e1:FUSEDMOE_W4_EARLY=1 e2:' AB_VARIANT_BENCH='old=bench_old' \
  bash bench/ab_device.sh early - 'qwen3-30b-a3b-tp1 8,64 mxfp4,nvfp4,mxfp4-fp8,w4a8-int4' \
  'gpt-oss-120b 8,64 mxfp4,nvfp4' 'deepseek-v3-tp1 8,64 mxfp4,nvfp4' 'qwen3-30b-a3b-tp1 160 nvfp4,mxfp4'
AB_TIMEOUT=150 AB_VARIANTS='dl: chain:FUSEDMOE_DECODE_LAYER=0' \
  bash bench/ab_device.sh dl - 'qwen3-30b-a3b-tp1 1 mxfp4,nvfp4,mxfp4-fp8,w4a8-int4,nvfp4-w4a4' \
  'gpt-oss-120b 1 mxfp4,nvfp4,mxfp4-fp8' 'deepseek-v3-tp1 1 mxfp4,nvfp4'
