#!/usr/bin/env bash
# r2: the 8- / 16-token tile boundary below 7 rows per expert, and the 16- / 32-token one at 16 rows: the default (8/16)
# against FUSEDMOE_W4_TILE_ROWS=3/15 (16-token tiles from 4 rows, 32-token from 16) and =5/15. Same binary as r1 (bin/bench
# of the commit in bin/sha); from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
AB_VARIANTS='def: a3:FUSEDMOE_W4_TILE_ROWS=3/15 a5:FUSEDMOE_W4_TILE_ROWS=5/15' AB_ORDER=def,a3,a5,a5,a3,def \
AB_TIMEOUT=200 AB_BENCH_ARGS='--check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 2' \
bash bench/ab_device.sh tilerows2 - 'qwen3-30b-a3b-tp1 64,80,96,256 w4a8-int4,mxfp4,nvfp4' \
  'deepseek-v3-tp1 128,160,192,512 w4a8-int4,mxfp4,nvfp4' 'gpt-oss-120b 128,160,192,512 mxfp4,nvfp4'
