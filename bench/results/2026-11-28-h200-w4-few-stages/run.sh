#!/usr/bin/env bash
# More weight stages per warp (3 or 4 instead of 2) in the 4-bit mma kernel's 8-token instances on grids of at most
# 16 warps per SM (one-token layers; FUSEDMOE_W4_FEW_STAGES=3 / 4, default 2: the instances as before). `bash
# bench/results/2026-11-28-h200-w4-few-stages/run.sh` from the repository root on the device: the 4-bit tests with
# each setting (and memcheck with 4), then the same-binary A/B of the three.
set -u
mkdir -p .devcarry
# The binaries travel as two packs (the device tool's size limit): the tests now, the bench in a second call
# (RUN_PART=ab).
if [ "${RUN_PART:-tests}" = tests ]; then
tar xf .devcarry/packt/tests.tgz -C .devcarry
F='Formats/W4Gpu.*:*LayerGpu*:*DecodeLayer*:W4MmaAct*'
for s in 3 4; do
  FUSEDMOE_W4_FEW_STAGES=$s timeout 300 .devcarry/bin/tests --gtest_filter="$F" > /tmp/t$s.log 2>&1
  echo "tests FEW_STAGES=$s rc=$? $(grep -E '^\[  PASSED|FAILED  \]|^\[  FAILED' /tmp/t$s.log | tail -3 | tr '\n' ' ')"
done
FUSEDMOE_W4_FEW_STAGES=4 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 .devcarry/bin/tests \
  --gtest_filter='Formats/W4Gpu.DecodeSizes*:W4MmaAct*' > /tmp/mc.log 2>&1
echo "memcheck FEW_STAGES=4 rc=$? $(grep -E 'ERROR SUMMARY|PASSED' /tmp/mc.log | tail -2 | tr '\n' ' ')"
exit 0
fi
AB_TIMEOUT=400 AB_ORDER=s2,s3,s4,s4,s3,s2,s2,s3,s4 \
AB_VARIANTS='s2:FUSEDMOE_W4_FEW_STAGES=2 s3:FUSEDMOE_W4_FEW_STAGES=3 s4:FUSEDMOE_W4_FEW_STAGES=4' \
  bash bench/ab_device.sh few - 'deepseek-v3-tp1 1,2 mxfp4,nvfp4,w4a8-int4,mxfp4-fp8,nvfp4-w4a4' \
  'gpt-oss-120b 1 mxfp4-fp8,nvfp4-w4a4' 'qwen3-30b-a3b-tp1 2 mxfp4,nvfp4,mxfp4-fp8'
