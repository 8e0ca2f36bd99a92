set -u
# kPairFine again, taken by k this time (w4_wgmma_pair_rule: 113..160 rows per expert and k >= 2048 for the fp32-D
# GEMM, k >= 4096 for the fused GEMM1 + activation): the W4 wgmma tests and their memcheck, then same-binary A/Bs
# (on = default, off = FUSEDMOE_W4_PAIR_FINE=0: kPairAll there) at the points that take it - DeepSeek-V3 TP1 4096
# (both GEMMs), gpt-oss-120b 4096 (GEMM2) - and Qwen3-30B-A3B 2048 (113..160 rows, short k: must not take it, so
# on / off is the same kernel there).
# `bash bench/results/2026-11-28-h200-w4-fine-by-k/run.sh`
AB_TESTS='*W4Wgmma*' AB_MEMCHECK='*W4Wgmma*' AB_ORDER=off,on,on,off,off,on bash bench/ab_device.sh fine \
  FUSEDMOE_W4_PAIR_FINE=0 'deepseek-v3-tp1 4096 mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4' 'gpt-oss-120b 4096 mxfp4,nvfp4' \
  'qwen3-30b-a3b-tp1 2048 mxfp4'

