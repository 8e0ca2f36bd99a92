#!/usr/bin/env bash
# W4A8's 8-token tile with its group sums in two sets (new) against eeb855a (old, bin/bench_old, built from ecd711d:
# the same sources), interleaved, with the W4A8 tests and a memcheck first; binaries carried.
AB_VARIANTS='old: new:' AB_VARIANT_BENCH='old=bench_old' AB_TESTS='Formats/W4Gpu.*w4a8*:*Stages*:Shapes/DecodeLayerW4Gpu.*w4a8*' \
AB_MEMCHECK='Formats/W4Gpu.DecodeSizesMatchOracle/w4a8_silu' AB_TIMEOUT=260 bash bench/ab_device.sh chains2 - \
  'deepseek-v3-tp1 1,8,64 w4a8-int4' 'qwen3-30b-a3b-tp1 8,64 w4a8-int4'
