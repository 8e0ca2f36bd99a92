#!/usr/bin/env bash
# r2: the tests again after the new test's width fix (392 -> 448: the k-order check needs multiples of 64).
set -u
tar xf .devcarry/pack/bins.tgz -C .devcarry
mkdir -p "$OUT/r2"
timeout 300 .devcarry/bin/tests --gtest_filter='*ActivationRow*:Formats/W4Gpu.*:*LayerGpu*fp8_channel*:*LayerGpu*mxfp4*:*LayerGpu*w4a8*:ChainedLaunch*:*DecodeLayerW4*' > "$OUT/r2/tests.log" 2>&1
echo "tests rc=$?"; grep -E '^\[  FAILED|PASSED|FAILED  \]' "$OUT/r2/tests.log" | tail -5
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 .devcarry/bin/tests --gtest_filter='*ActivationRowLanes*' > "$OUT/r2/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E 'PASSED|FAILED  \]|ERROR SUMMARY' "$OUT/r2/memcheck.log" | tail -3
cat .devcarry/bin/sha > "$OUT/r2/sha.txt"; gzip "$OUT/r2/"*.log
