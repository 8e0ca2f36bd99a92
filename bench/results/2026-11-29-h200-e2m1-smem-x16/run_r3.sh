#!/usr/bin/env bash
# r3: the hand-over point between the mma kernel's kSx tiles and the large-batch wgmma kernels at 28 and 32 expected
# rows per expert: FUSEDMOE_W4_WGMMA_MIN_ROWS=16 (the rule before, wgmma from 16 rows) against =33 (the mma kernel up to
# 32 rows). Same binaries as r2; from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
AB_VARIANTS='wgmma:FUSEDMOE_W4_WGMMA_MIN_ROWS=16 mma:FUSEDMOE_W4_WGMMA_MIN_ROWS=33' AB_ORDER=wgmma,mma,mma,wgmma AB_TIMEOUT=200 \
AB_BENCH_ARGS='--check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 2' \
bash bench/ab_device.sh wgrows2 - 'qwen3-30b-a3b-tp1 448,512 w4a8-int4,mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4' \
  'deepseek-v3-tp1 896,1024 w4a8-int4,mxfp4,nvfp4,nvfp4-w4a4' 'gpt-oss-120b 896,1024 mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4'
