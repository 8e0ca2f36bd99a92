#!/usr/bin/env bash
# Two builds A/B: old = b1e7394 (the finalize reads its slots early), new = the 4-bit layers' row activation kernels
# also reading a row's expert and dequant factor before their wait (ActivationParams::early; activation_row_vec,
# activation_row_cluster, activation_nvfp4_vec). The activation / finalize path tests and the 4-bit layer tests three
# times over, a memcheck, then the A/B on the decode points that run an activation kernel (fp8 / nvfp4 activations).
# `bash bench/results/2026-11-28-h200-act-early/run.sh` from the repository root on the device.
tar xf .devcarry/pack/bins.tgz -C .devcarry
W4='*ActivationRowPaths*:*ActivationNvfp4Paths*:*FinalizePaths*:Formats/W4Gpu.*:W4GpuEdge.*:AllFormatsActivations/LayerGpu.MatchesOracle/*fp4*:AllFormatsActivations/LayerGpu.MatchesOracle/*w4a8*:Shapes/DecodeLayerW4Gpu.*'
timeout 300 .devcarry/bin/tests --gtest_filter="$W4" --gtest_repeat=3 > /tmp/act_early_repeat.log 2>&1
echo "repeat rc=$?"; grep -E "^\[  FAILED|PASSED  \]|FAILED  \]" /tmp/act_early_repeat.log | sort | uniq -c | tail -8
mkdir -p "$OUT/actrep" && gzip -c /tmp/act_early_repeat.log > "$OUT/actrep/repeat.log.gz"
AB_MEMCHECK='*ActivationRowPaths*silu*:*ActivationNvfp4Paths*:Formats/W4Gpu.DecodeSizesMatchOracle/*' AB_TIMEOUT=150 \
AB_VARIANTS='old: new:' AB_VARIANT_BENCH='old=bench_old' \
  bash bench/ab_device.sh actearly - 'qwen3-30b-a3b-tp1 8,64 mxfp4-fp8,w4a8-int4,nvfp4-w4a4' \
  'gpt-oss-120b 8,64 mxfp4-fp8' 'deepseek-v3-tp1 8 mxfp4-fp8'
