set -u
# The 4-bit mma kernel's 16-token pass (two 8-token tiles on one decode of the weights) from 6 expected rows per
# expert instead of 9: with 8-token passes an expert of 9..16 rows streams its weights twice, which at ~8 rows per
# expert (uniform routing: Poisson-like counts) is ~40% of the experts. Same binary: off = FUSEDMOE_W4_NT2_ROWS=9 (the
# default), on = FUSEDMOE_W4_NT2_ROWS=6. Points at 6 and 8 expected rows per expert.
# `bash bench/results/2026-11-28-h200-w4-nt2-rows/run.sh`
AB_ON=FUSEDMOE_W4_NT2_ROWS=6 AB_ORDER=off,on,on,off,off,on bash bench/ab_device.sh nt2 FUSEDMOE_W4_NT2_ROWS=9 \
  'deepseek-v3-tp1 192,256 mxfp4,nvfp4,w4a8-int4' 'gpt-oss-120b 192,256 mxfp4,nvfp4' \
  'qwen3-30b-a3b-tp1 96,128 mxfp4,nvfp4,w4a8-int4'
