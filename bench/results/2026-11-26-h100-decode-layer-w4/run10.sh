set -u
# v9: the one-token kernel for MXFP4 with per-token fp8 activations and W4A8 (x and the activation quantised per row
# inside it): decode-layer, W4 and layer tests, memcheck of the 4-bit one-token tests, A/B v8 (4dedccc: the chain for
# these formats) vs v9 at M = 1.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/r10; mkdir -p $R; t0=$(date +%s); B=$PWD/.devcarry/bin; B8=$PWD/.devcarry/bin_v8
timeout 200 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*:*W4*:*E2m1*:*Int4*:AllFormatsActivations/LayerGpu.*:EdgeGpu.*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4
timeout 120 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayerW4*:DecodeLayerGpuEdge.*' > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3
timeout 240 python3 bench/ab.py run --out $R/ab --variant v8: --variant-bench v8=$B8/fusedmoe-bench --variant v9: --variant-bench v9=$B/fusedmoe-bench \
  --order v8,v9,v8,v9,v8,v9 --base v8 -- --preset qwen3-30b-a3b-tp1,gpt-oss-120b,gpt-oss-120b-interleaved --m 1 --formats mxfp4-fp8,w4a8-int4,mxfp4 \
  --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.log 2>&1; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
tail -12 $R/ab.log
gzip -9 $R/tests.log $R/memcheck.log
