set -u
# v6 as kept (mask-multiply-mask decode in the one-token kernel and the wgmma kernel only; the mma kernel keeps the
# shift form): E2m1Device (both forms over every word), W4, decode-layer and 4-bit layer tests.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/r7; mkdir -p $R; t0=$(date +%s); B=$PWD/.devcarry/bin
timeout 200 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*:*W4*:*E2m1*:*Nvfp4*:AllFormatsActivations/LayerGpu.*mxfp4*:AllFormatsActivations/LayerGpu.*nvfp4*:Formats/*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/tests.log | head -20; grep -E "DecodeWordForms|PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -6
gzip -9 $R/tests.log
