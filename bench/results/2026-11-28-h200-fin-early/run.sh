#!/usr/bin/env bash
# Same-binary A/B: off = FUSEDMOE_FIN_EARLY=0 (the finalize waits for GEMM2 first), on = the 4-bit layers' finalize
# reading its first token's slots before its wait (FinalizeParams::early). First the 4-bit layer / decode tests three
# times over (a race with an earlier kernel would show as wrong values in some runs), then a memcheck.
# `bash bench/results/2026-11-28-h200-fin-early/run.sh` from the repository root on the device.
tar xf .devcarry/pack/bins.tgz -C .devcarry
W4='*FinalizePaths*:Formats/W4Gpu.*:W4GpuEdge.*:W4MmaActGpu.*:AllFormatsActivations/LayerGpu.MatchesOracle/*fp4*:AllFormatsActivations/LayerGpu.MatchesOracle/*w4a8*:Shapes/DecodeLayerW4Gpu.*'
timeout 240 .devcarry/bin/tests --gtest_filter="$W4" --gtest_repeat=3 > /tmp/fin_early_repeat.log 2>&1
echo "repeat rc=$?"; grep -E "^\[  FAILED|PASSED  \]|FAILED  \]" /tmp/fin_early_repeat.log | sort | uniq -c | tail -8
mkdir -p "$OUT/finrep" && gzip -c /tmp/fin_early_repeat.log > "$OUT/finrep/repeat.log.gz"
AB_MEMCHECK='*FinalizePaths*:Formats/W4Gpu.DecodeSizesMatchOracle/*' AB_TIMEOUT=150 \
  bash bench/ab_device.sh finearly FUSEDMOE_FIN_EARLY=0 'qwen3-30b-a3b-tp1 8,64 mxfp4,mxfp4-fp8' \
  'gpt-oss-120b 8,64 mxfp4' 'deepseek-v3-tp1 8 mxfp4,w4a8-int4'
