#!/usr/bin/env bash
# The W4A4 activation's NVFP4 quantisation on 16 lanes per 16-wide block at decode sizes (activation_nvfp4_lanes_kernel,
# up to 512 rows; FUSEDMOE_NVFP4_LANES=0 the vector kernel as before), and the one-token per-token-fp8 4-bit layers
# above 128 KB of shared memory on the kernel chain (decode_layer_w4_applies). Variants: old = 4dfc837's build,
# vec = this build with FUSEDMOE_NVFP4_LANES=0, new = this build. Tests first.
# `bash bench/results/2026-11-28-h200-nvfp4-lanes/run.sh` from the repository root on the device.
tar xf .devcarry/pack/bins.tgz -C .devcarry
T='*ActivationNvfp4Paths*:*ActivationRowPaths*:Shapes/DecodeLayer*:DecodeLayerGpuEdge.*:AllFormatsActivations/LayerGpu.MatchesOracle/*nvfp4*:AllFormatsActivations/LayerGpu.MatchesOracle/*mxfp4*:Formats/W4Gpu.*'
timeout 300 .devcarry/bin/tests --gtest_filter="$T" --gtest_repeat=2 > /tmp/lanes_tests.log 2>&1
echo "tests rc=$?"; grep -E "^\[  FAILED|PASSED  \]|FAILED  \]" /tmp/lanes_tests.log | sort | uniq -c | tail -8
mkdir -p "$OUT/t" && gzip -c /tmp/lanes_tests.log > "$OUT/t/tests.log.gz"
AB_MEMCHECK='*ActivationNvfp4Paths*lanes*' AB_TIMEOUT=200 \
AB_VARIANTS='old: vec:FUSEDMOE_NVFP4_LANES=0 new:' AB_VARIANT_BENCH='old=bench_old' \
  bash bench/ab_device.sh lanes - 'gpt-oss-120b 1,8,64 nvfp4-w4a4,mxfp4-fp8' 'qwen3-30b-a3b-tp1 8,64 nvfp4-w4a4' \
  'deepseek-v3-tp1 1,8 nvfp4-w4a4'
