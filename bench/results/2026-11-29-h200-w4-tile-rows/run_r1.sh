#!/usr/bin/env bash
# Which token tile the mma kernel takes by the expected rows per expert: the default (8-token tiles up to 8 rows,
# 16-token up to 16, 32-token above) against FUSEDMOE_W4_TILE_ROWS=8/12 and =6/12 (an expert with more rows than its
# tile takes another pass over its weights; a bigger tile does more MMA work per weight byte but fewer passes). Same
# binary (bin/bench of the commit in bin/sha); from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
AB_VARIANTS='def: t812:FUSEDMOE_W4_TILE_ROWS=8/12 t612:FUSEDMOE_W4_TILE_ROWS=6/12' AB_ORDER=def,t812,t612,t612,t812,def \
AB_TIMEOUT=200 AB_BENCH_ARGS='--check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 2' \
bash bench/ab_device.sh tilerows - 'qwen3-30b-a3b-tp1 112,128,208,256 w4a8-int4,mxfp4,nvfp4' \
  'deepseek-v3-tp1 224,256,416,512 w4a8-int4,mxfp4,nvfp4' 'gpt-oss-120b 224,256,416,512 mxfp4,nvfp4'
