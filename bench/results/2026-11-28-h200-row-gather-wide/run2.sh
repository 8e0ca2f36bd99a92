#!/usr/bin/env bash
# r2: the wide ROW gathers up to 1024 rows (64 tokens x top-8 = 512) - FUSEDMOE_ROW_GATHER_WIDE_ROWS=1024, a probe of the
# row limit - against the kept 256; the gather path tests with the probe on first.
set -u
tar xf .devcarry/pack/bins.tgz -C .devcarry
FUSEDMOE_ROW_GATHER_WIDE_ROWS=1024 timeout 200 .devcarry/bin/tests --gtest_filter='*GatherRowPaths*:*PlanGather*' > /tmp/r2_tests.log 2>&1
echo "tests (1024) rc=$?"; grep -E '^\[  FAILED|PASSED|FAILED  \]' /tmp/r2_tests.log | tail -3
AB_TIMEOUT=200 AB_ORDER=r256,r1024,r1024,r256,r256,r1024 AB_VARIANTS='r256: r1024:FUSEDMOE_ROW_GATHER_WIDE_ROWS=1024' \
  bash bench/ab_device.sh rgw2 - 'deepseek-v3-tp1 64 mxfp4-fp8,w4a8-int4,fp8-channel' \
  'qwen3-30b-a3b-tp1 64,128 mxfp4-fp8,w4a8-int4'
