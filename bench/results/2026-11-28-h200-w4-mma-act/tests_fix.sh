#!/usr/bin/env bash
# The W4MmaActGpu tests after their fix (k = 448; skipped under the switches), with the decode tests, a memcheck and
# the two switches. `bash bench/results/2026-11-28-h200-w4-mma-act/tests_fix.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=.devcarry/bin O=$OUT/fix; mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version --format=csv; cat $B/sha; date -u; } > $O/device.txt
v() { grep -E "^\[  FAILED|PASSED  \]|FAILED  \]|SKIPPED \]|ERROR SUMMARY|Skipped|switched" "$1" | tail -8 | sed "s|^|$2: |"; }
$B/tests --gtest_filter='W4MmaActGpu.*:Formats/W4Gpu.*:W4GpuEdge.*:AllFormatsActivations/LayerGpu.MatchesOracle/*fp4*' > $O/tests.log 2>&1; v $O/tests.log tests
compute-sanitizer --tool memcheck --error-exitcode 3 $B/tests --gtest_filter='W4MmaActGpu.*' > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; v $O/memcheck.log memcheck
for s in FUSEDMOE_W4_MMA_ACT=0 FUSEDMOE_W4_LEAN=0; do env $s $B/tests --gtest_filter='W4MmaActGpu.*' > $O/$s.log 2>&1; v $O/$s.log $s; done
