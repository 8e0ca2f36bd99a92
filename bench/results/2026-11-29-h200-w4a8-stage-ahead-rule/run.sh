#!/usr/bin/env bash
# Same-binary A/B of W4A8's stage-ahead activations on grids of >= 4 rounds (on: the default) against
# FUSEDMOE_W4A8_STAGE_AHEAD=0 (off); binaries (bench, tests) built from the commit in r1/device.txt's tree, carried.
AB_TESTS='Formats/W4Gpu.DecodeSizes*w4a8*:*Stages*' AB_MEMCHECK='Formats/W4Gpu.DecodeSizesMatchOracle/w4a8_silu' \
AB_TIMEOUT=200 bash bench/ab_device.sh saround FUSEDMOE_W4A8_STAGE_AHEAD=0 'deepseek-v3-tp1 8,16,64 w4a8-int4' \
  'qwen3-30b-a3b-tp1 8,16,32,64 w4a8-int4'
