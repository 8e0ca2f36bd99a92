#!/usr/bin/env bash
# r3: the lanes kernel up to 512 rows (64 tokens) - FUSEDMOE_ROW_LANES_ROWS=512, a probe of the row limit - against
# the kept 64; the ROW path tests with the probe on first.
set -u
tar xf .devcarry/pack/bins.tgz -C .devcarry
FUSEDMOE_ROW_LANES_ROWS=512 timeout 200 .devcarry/bin/tests --gtest_filter='*ActivationRow*' > /tmp/r3_tests.log 2>&1
echo "tests (512) rc=$?"; grep -E '^\[  FAILED|PASSED|FAILED  \]' /tmp/r3_tests.log | tail -3
AB_TIMEOUT=200 AB_ORDER=r64,r512,r512,r64,r64,r512 AB_VARIANTS='r64: r512:FUSEDMOE_ROW_LANES_ROWS=512' \
  bash bench/ab_device.sh rl3 - 'gpt-oss-120b 32,64 mxfp4-fp8' 'deepseek-v3-tp1 64 mxfp4-fp8,w4a8-int4' \
  'qwen3-30b-a3b-tp1 32,64 mxfp4-fp8,w4a8-int4'
