#!/usr/bin/env bash
# The nvfp4 (W4A4) quantisers' per-value step without a division (src/cuda/nvfp4_round.cuh): two builds, `old` =
# c356e0c (bin/bench_old), `new` = the change (bin/bench), interleaved on one GPU. First the tests that reach the
# nvfp4 quantisers (the new exhaustive device test included) and a memcheck of the nvfp4 gather / activation cases.
# `bash bench/results/2026-11-29-h200-nvfp4-round/run.sh` from the repository root on the device (the pack carried).
set -u
AB_TESTS='E2m1Device*:*Nvfp4*:*nvfp4*:*W4*:*DecodeLayer*:*PlanGather*' \
AB_MEMCHECK='Cases/GatherNvfp4Paths*:Cases/ActivationNvfp4Paths*' AB_TIMEOUT=420 \
AB_VARIANTS='old: new:' AB_VARIANT_BENCH='old=bench_old' AB_ORDER=old,new,new,old,old,new \
  bash bench/ab_device.sh round - 'deepseek-v3-tp1 1,8,64,4096 nvfp4-w4a4' 'qwen3-30b-a3b-tp1 1,8,64,1024,4096 nvfp4-w4a4' \
  'gpt-oss-120b 1,8,64,4096 nvfp4-w4a4'
