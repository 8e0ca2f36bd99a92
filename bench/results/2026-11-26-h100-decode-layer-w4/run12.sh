set -u
# v11: v10 with W4A4 taken up to 128 KB of shared memory and the other modes' code as in v9 (constexpr guards)
# : decode-layer, W4 and layer tests, memcheck of the 4-bit one-token tests, A/B v9 (the chain for
# W4A4; 52e6686) vs v11 at M = 1.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/r12; mkdir -p $R; t0=$(date +%s); B=$PWD/.devcarry/bin; B8=$PWD/.devcarry/bin_v9
timeout 200 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*:*W4*:*E2m1*:*Int4*:AllFormatsActivations/LayerGpu.*:EdgeGpu.*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4
timeout 120 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayerW4*:DecodeLayerGpuEdge.*' > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3
timeout 240 python3 bench/ab.py run --out $R/ab --variant v9: --variant-bench v9=$B8/fusedmoe-bench --variant v11: --variant-bench v11=$B/fusedmoe-bench \
  --order v9,v11,v9,v11,v9,v11 --base v9 -- --preset qwen3-30b-a3b-tp1,gpt-oss-120b --m 1 --formats nvfp4-w4a4,nvfp4,mxfp4,mxfp4-fp8,w4a8-int4 \
  --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.log 2>&1; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
tail -12 $R/ab.log
gzip -9 $R/tests.log $R/memcheck.log
