set -u
# v10: the one-token kernel for NVFP4 with NVFP4 activations (W4A4: x per slot, the activation by 16-wide blocks)
# : decode-layer, W4 and layer tests, memcheck of the 4-bit one-token tests, A/B v9 (the chain for
# W4A4; 52e6686) vs v10 at M = 1.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/r11; mkdir -p $R; t0=$(date +%s); B=$PWD/.devcarry/bin; B8=$PWD/.devcarry/bin_v9
timeout 200 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*:*W4*:*E2m1*:*Int4*:AllFormatsActivations/LayerGpu.*:EdgeGpu.*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4
timeout 120 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayerW4*:DecodeLayerGpuEdge.*' > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3
timeout 240 python3 bench/ab.py run --out $R/ab --variant v9: --variant-bench v9=$B8/fusedmoe-bench --variant v10: --variant-bench v10=$B/fusedmoe-bench \
  --order v9,v10,v9,v10,v9,v10 --base v9 -- --preset qwen3-30b-a3b-tp1,gpt-oss-120b,gpt-oss-120b-interleaved --m 1 --formats nvfp4-w4a4,nvfp4,mxfp4-fp8 \
  --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.log 2>&1; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
tail -12 $R/ab.log
gzip -9 $R/tests.log $R/memcheck.log
