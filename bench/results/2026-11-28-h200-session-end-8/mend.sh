#!/usr/bin/env bash
# After the review mend (shared nvfp4_lane_value / cluster_row_scale helpers, row_threads8's cap; same operations):
# the path tests that compare the changed kernels with the general ones byte for byte, the 4-bit / one-token / layer
# tests, and memcheck of the changed kernels' tests. `bash bench/results/2026-11-28-h200-session-end-8/mend.sh`.
set -u
tar xf .devcarry/pack/bins.tgz -C .devcarry
mkdir -p "$OUT/mend"
timeout 400 .devcarry/bin/tests --gtest_filter='*ActivationRow*:*ActivationNvfp4Paths*:*PlanGather*:*GatherRowPaths*:*GatherNvfp4Paths*:*GatherVecPaths*:Formats/W4Gpu.*:*DecodeLayerW4*:*LayerGpu*fp4*:*LayerGpu*w4a8*:*LayerGpu*fp8_channel*:ChainedLaunch*' > "$OUT/mend/tests.log" 2>&1
echo "tests rc=$?"; grep -E '^\[  FAILED|PASSED|FAILED  \]' "$OUT/mend/tests.log" | tail -5
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 .devcarry/bin/tests --gtest_filter='*ActivationRowLanes*:*ActivationRowPaths*:*ActivationNvfp4Paths*:*PlanGather*' > "$OUT/mend/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E 'PASSED|FAILED  \]|ERROR SUMMARY' "$OUT/mend/memcheck.log" | tail -3
cat .devcarry/bin/sha > "$OUT/mend/sha.txt"; gzip "$OUT/mend/"*.log
