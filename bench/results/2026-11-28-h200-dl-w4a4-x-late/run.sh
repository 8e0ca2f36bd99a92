#!/usr/bin/env bash
# The one-token W4A4 layer kernel quantising x after its first GEMM1 task's weight loads are issued (decode_layer_w4.cu;
# FUSEDMOE_DL_NVFP4_X_LATE=0: x first, as before). `bash bench/results/2026-11-28-h200-dl-w4a4-x-late/run.sh` from the
# repository root on the device: the one-token tests both ways, memcheck, then the same-binary A/B.
set -u
tar xf .devcarry/pack/bins.tgz -C .devcarry
FUSEDMOE_DL_NVFP4_X_LATE=0 timeout 200 .devcarry/bin/tests --gtest_filter='*DecodeLayerW4*' > /tmp/xf_tests.log 2>&1
echo "one-token tests, x first: rc=$?"; grep -E '^\[  FAILED|PASSED|FAILED  \]' /tmp/xf_tests.log | tail -3
AB_TESTS='*DecodeLayerW4*:*DecodeLayerGpuEdge*' AB_MEMCHECK='*DecodeLayerW4*w4a4*' AB_TIMEOUT=150 \
AB_ORDER=off,on,on,off,off,on,on,off AB_VARIANTS='off:FUSEDMOE_DL_NVFP4_X_LATE=0 on:' \
  bash bench/ab_device.sh xl - 'qwen3-30b-a3b-tp1 1 nvfp4-w4a4,nvfp4'
