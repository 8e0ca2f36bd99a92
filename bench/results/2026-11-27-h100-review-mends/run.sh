set -u
# Review mends (host-side refactors; the w4_wgmma.cu and stream_gemm.cu SASS is identical): the GPU tests of the touched paths.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/r; mkdir -p $R; nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat .devcarry/sha8 >> $R/device.txt
timeout 200 .devcarry/bin/fusedmoe_gpu_tests --gtest_filter='*StreamGemm*:*Gemm1BlockAct*:*Gemm1ChannelAct*:*W4*:*w4*:*Korder*:*Block*:*DecodeLayer*' > $R/tests.log 2>&1; echo "tests rc=$?"
grep -E "^\[  FAILED" $R/tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -3; gzip -9 $R/tests.log
cd $OUT && tar czf r.tgz r && rm -rf r
