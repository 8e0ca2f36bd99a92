#!/usr/bin/env bash
# W4A8's 2-stage 8-token tile loading a stage's activations when the stage before starts (new: 35c44ac +
# stage_ahead.diff) against 35c44ac (old, bin/bench_old built from ff20e5d: the same code), interleaved; binaries carried.
AB_VARIANTS='old: new:' AB_VARIANT_BENCH='old=bench_old' AB_TESTS='Formats/W4Gpu.*w4a8*:*Stages*' \
AB_MEMCHECK='Formats/W4Gpu.DecodeSizesMatchOracle/w4a8_silu' AB_TIMEOUT=200 bash bench/ab_device.sh deepx - \
  'deepseek-v3-tp1 8,64 w4a8-int4' 'qwen3-30b-a3b-tp1 8,64 w4a8-int4'
