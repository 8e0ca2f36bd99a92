#!/usr/bin/env bash
# W4A8's 8-token tile held to 6 blocks per SM (new: eb201fb + minblocks6.diff, 80 registers with a 16-byte spill)
# against eb201fb (old, bin/bench_old: 96 registers, 5 blocks per SM), interleaved; binaries carried.
AB_VARIANTS='old: new:' AB_VARIANT_BENCH='old=bench_old' AB_TESTS='Formats/W4Gpu.*w4a8*:*Stages*' \
AB_MEMCHECK='Formats/W4Gpu.DecodeSizesMatchOracle/w4a8_silu' AB_TIMEOUT=260 bash bench/ab_device.sh minblk6 - \
  'deepseek-v3-tp1 8,64 w4a8-int4' 'qwen3-30b-a3b-tp1 8,64 w4a8-int4'
