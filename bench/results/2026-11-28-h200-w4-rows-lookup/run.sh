#!/usr/bin/env bash
# Same-call A/B of two builds: old = dab8ef9's (bin/bench_old), new = the mma kernel's expert lookup returning the
# expert's rows from its own loads (active_expert_rows; bin/bench). The 4-bit decode tests (new build) and their
# memcheck first. `bash bench/results/2026-11-28-h200-w4-rows-lookup/run.sh` from the repository root on the device.
AB_VARIANTS='old: new:' AB_VARIANT_BENCH='old=bench_old' \
AB_TESTS='Formats/W4Gpu.*:W4GpuEdge.*:Shapes/DecodeLayerW4Gpu.*:AllFormatsActivations/LayerGpu.MatchesOracle/*fp4*' \
AB_MEMCHECK='Formats/W4Gpu.DecodeSizesMatchOracle/*' AB_TIMEOUT=170 \
  bash bench/ab_device.sh rows - 'qwen3-30b-a3b-tp1 8,64 mxfp4,nvfp4,w4a8-int4' 'gpt-oss-120b 8,64 mxfp4,nvfp4' \
  'deepseek-v3-tp1 1,8,64 mxfp4,w4a8-int4'
