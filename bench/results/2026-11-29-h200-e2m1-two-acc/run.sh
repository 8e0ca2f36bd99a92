#!/usr/bin/env bash
# The e2m1 8-token tiles' 3-stage instances (one-token grids of few warps at k >= 4096) with two accumulator sets (new:
# ff20e5d + two_acc.diff) against ff20e5d (old, bin/bench_old), interleaved; binaries carried.
AB_VARIANTS='old: new:' AB_VARIANT_BENCH='old=bench_old' AB_TESTS='Formats/W4Gpu.DecodeSizes*:*Stages*:W4MmaActGpu.*' \
AB_MEMCHECK='W4MmaStagesGpu.*' AB_TIMEOUT=260 bash bench/ab_device.sh twoacc - 'deepseek-v3-tp1 1,2 mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4'
