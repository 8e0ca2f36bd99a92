#!/usr/bin/env bash
# W4A8 mma kernel: L1 prefetch of the activations N sub-chunks ahead (l1_prefetch.diff) against the build without it.
# bin/bench_old: 2f9ea78; bin/bench: 2f9ea78 + l1_prefetch.diff. From the repository root on the device.
AB_VARIANTS='old: d2:FUSEDMOE_W4A8_XPF=2 d4:FUSEDMOE_W4A8_XPF=4 d8:FUSEDMOE_W4A8_XPF=8' AB_VARIANT_BENCH='old=bench_old' \
AB_ORDER=old,d2,d4,d8,d8,d4,d2,old AB_TESTS='Formats/W4Gpu.DecodeSizes*w4a8*:*Stages*:Int4Fp8Device.*' \
AB_MEMCHECK='Formats/W4Gpu.DecodeSizesMatchOracle/w4a8_silu' AB_TIMEOUT=270 \
AB_BENCH_ARGS='--check-tokens 2 --no-ceilings --stage-runs 2 --max-minutes 0.1' \
bash bench/ab_device.sh xpf - 'deepseek-v3-tp1 1,8,64 w4a8-int4' 'qwen3-30b-a3b-tp1 8,64 w4a8-int4'
