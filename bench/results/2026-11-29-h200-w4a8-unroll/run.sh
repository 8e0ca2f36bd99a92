#!/usr/bin/env bash
# W4A8's 8-token tile with its stage loop unrolled twice (new: ecd711d + unroll.diff) against ecd711d (old,
# bin/bench_old), interleaved; binaries carried in .devcarry/pack/bins.tgz.
AB_VARIANTS='old: new:' AB_VARIANT_BENCH='old=bench_old' AB_TESTS='Formats/W4Gpu.*w4a8*:*Stages*:Int4Fp8Device.*' \
AB_MEMCHECK='Formats/W4Gpu.DecodeSizesMatchOracle/w4a8_silu' AB_TIMEOUT=260 bash bench/ab_device.sh unroll - \
  'deepseek-v3-tp1 1,8,64 w4a8-int4' 'qwen3-30b-a3b-tp1 8,64 w4a8-int4'
