#!/usr/bin/env bash
# After the session end: the plan + gather dispatch put in braces (5b64b42, no path change) - the gather, activation
# and 4-bit layer tests again. `bash bench/results/2026-11-28-h200-session-end-8/tidy.sh` from the repository root.
set -u
tar xf .devcarry/pack/bins.tgz -C .devcarry
mkdir -p "$OUT/tidy"
timeout 400 .devcarry/bin/tests --gtest_filter='*PlanGather*:*GatherRowPaths*:*GatherNvfp4Paths*:*GatherVecPaths*:*ActivationRow*:*ActivationNvfp4Paths*:Formats/W4Gpu.*:*DecodeLayerW4*:*LayerGpu*fp4*:*LayerGpu*w4a8*:*LayerGpu*fp8_channel*:ChainedLaunch*' > "$OUT/tidy/tests.log" 2>&1
echo "tests rc=$?"; grep -E '^\[  FAILED|PASSED|FAILED  \]' "$OUT/tidy/tests.log" | tail -5
cat .devcarry/bin/sha > "$OUT/tidy/sha.txt"; gzip "$OUT/tidy/tests.log"
