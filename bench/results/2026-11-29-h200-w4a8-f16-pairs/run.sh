#!/usr/bin/env bash
# W4A8's mma decode by int4x8_to_f16_pairs (new) against the three-shift decode (old, bin/bench_old built from
# aff08d7), interleaved, with the W4A8 / decode-layer / int4 tests and a memcheck first. Run from the repository root
# on the device machine with the pack carried (.devcarry/pack/bins.tgz: bin/bench and bin/tests of the new tree,
# bin/bench_old).
AB_VARIANTS='old: new:' AB_VARIANT_BENCH='old=bench_old' \
AB_TESTS='Int4Fp8Device.*:W4GpuEdge.*:W4a8WgmmaGpu.*:Shapes/DecodeLayerW4Gpu.*:Formats/W4Gpu.*w4a8*:*Stages*' \
AB_MEMCHECK='Int4Fp8Device.F16Pairs*:Formats/W4Gpu.DecodeSizesMatchOracle/w4a8_silu:Shapes/DecodeLayerW4Gpu.MatchesOracle/qwen3_w4a8_silu' \
AB_TIMEOUT=260 bash bench/ab_device.sh w4a8pairs - 'deepseek-v3-tp1 1,8,64 w4a8-int4' 'qwen3-30b-a3b-tp1 1,8,64 w4a8-int4'
