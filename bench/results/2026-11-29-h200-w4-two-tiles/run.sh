#!/usr/bin/env bash
# The mma kernel's plain 8-token tiles with two 16-row tiles per warp on one stage pipeline (two_tiles.diff), same-binary
# A/B against one tile per warp (FUSEDMOE_W4_TWO=0). bin/bench, bin/tests: 2f9ea78 + two_tiles.diff. From the repository
# root on the device.
AB_ORDER=off,on,on,off,off,on AB_TESTS='W4MmaStagesGpu.*:Formats/W4Gpu.DecodeSizes*:Formats/W4Gpu.Ragged*' \
AB_MEMCHECK='W4MmaStagesGpu.TwoTilesBitwiseEqualToOne' AB_TIMEOUT=280 \
AB_BENCH_ARGS='--check-tokens 2 --no-ceilings --stage-runs 2 --max-minutes 0.1' \
bash bench/ab_device.sh two FUSEDMOE_W4_TWO=0 'qwen3-30b-a3b-tp1 8,16,64 w4a8-int4,mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4' \
  'deepseek-v3-tp1 8,64 w4a8-int4,mxfp4,mxfp4-fp8,nvfp4' 'gpt-oss-120b 8,64 nvfp4,nvfp4-w4a4'
