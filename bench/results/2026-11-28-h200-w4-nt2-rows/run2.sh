set -u
# r2: NVFP4 only (the one format that gained at 8 rows in r1): 16-token passes from 7 expected rows per expert
# (on = FUSEDMOE_W4_NT2_ROWS=7) against the default 9 (off), at 7 and 8 rows, nvfp4 and nvfp4-w4a4.
# `bash bench/results/2026-11-28-h200-w4-nt2-rows/run2.sh`
AB_ON=FUSEDMOE_W4_NT2_ROWS=7 AB_ORDER=off,on,on,off,off,on bash bench/ab_device.sh nt2r2 FUSEDMOE_W4_NT2_ROWS=9 \
  'deepseek-v3-tp1 224,256 nvfp4,nvfp4-w4a4' 'gpt-oss-120b 224,256 nvfp4,nvfp4-w4a4' \
  'qwen3-30b-a3b-tp1 112,128 nvfp4,nvfp4-w4a4'
