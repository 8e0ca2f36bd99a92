#!/usr/bin/env bash
# The 4-bit mma GEMM2 with k split in two on one-token grids of few warps (w4_mma_split_pays; FUSEDMOE_W4_SPLIT=0: one
# k range), the finalize adding the halves (FinalizeParams::y2). Tests first (the W4 decode tests, with split cases,
# the finalize paths with y2, the one-token layers), a memcheck; then same-binary A/Bs: the split at gpt-oss-120b 1-4
# tokens, and the chain (with the split) against the one-kernel layer at one token (FUSEDMOE_DECODE_LAYER=0).
# `bash bench/results/2026-11-28-h200-w4-split/run.sh` from the repository root on the device.
tar xf .devcarry/pack/bins.tgz -C .devcarry
T='Formats/W4Gpu.*:*FinalizePaths*:Shapes/DecodeLayerW4Gpu.*:DecodeLayerGpuEdge.*:AllFormatsActivations/LayerGpu.MatchesOracle/*fp4*'
timeout 300 .devcarry/bin/tests --gtest_filter="$T" --gtest_repeat=2 > /tmp/split_tests.log 2>&1
echo "tests rc=$?"; grep -E "^\[  FAILED|PASSED  \]|FAILED  \]" /tmp/split_tests.log | sort | uniq -c | tail -8
FUSEDMOE_W4_SPLIT=0 timeout 200 .devcarry/bin/tests --gtest_filter='Formats/W4Gpu.DecodeSizesMatchOracle/*' > /tmp/split_off.log 2>&1
echo "split off rc=$?"; grep -E "^\[  FAILED|PASSED  \]|FAILED  \]" /tmp/split_off.log | tail -3
mkdir -p "$OUT/t" && gzip -c /tmp/split_tests.log > "$OUT/t/tests.log.gz" && gzip -c /tmp/split_off.log > "$OUT/t/split_off.log.gz"
AB_MEMCHECK='Formats/W4Gpu.DecodeSizesMatchOracle/*fp4*' AB_TIMEOUT=200 \
AB_VARIANTS='one:FUSEDMOE_W4_SPLIT=0 split:' \
  bash bench/ab_device.sh split - 'gpt-oss-120b 1,2,4 mxfp4-fp8,nvfp4-w4a4,mxfp4,nvfp4'
AB_TIMEOUT=150 AB_VARIANTS='dl: chain:FUSEDMOE_DECODE_LAYER=0' \
  bash bench/ab_device.sh dlsplit - 'gpt-oss-120b 1 mxfp4,nvfp4' 'qwen3-30b-a3b-tp1 1 mxfp4'
