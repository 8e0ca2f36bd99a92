set -u
# The 4-bit mma kernel's activation loads past k from a zero page instead of predicated loads (whose registers
# needed zeroing first): W4 tests and a memcheck of the decode-size ones, then same-binary A/Bs (on = default, off =
# FUSEDMOE_W4_ZERO_PAGE=0: every instance with the predicated loads, SASS-identical to c8d39ff's). MXFP4's plain
# 8-token instance is the same kernel both ways (Qwen3 mxfp4 at 8 tokens: the control).
# `bash bench/results/2026-11-28-h200-w4-zero-page/run.sh`
AB_TESTS='Formats/W4Gpu.*:W4GpuEdge.*' AB_MEMCHECK='Formats/W4Gpu.DecodeSizesMatchOracle/*' AB_ORDER=off,on,on,off,off,on \
  bash bench/ab_device.sh zp FUSEDMOE_W4_ZERO_PAGE=0 'qwen3-30b-a3b-tp1 8,160 nvfp4,w4a8-int4,mxfp4' \
  'gpt-oss-120b 8,64 mxfp4,nvfp4' 'deepseek-v3-tp1 8 nvfp4,w4a8-int4'
