set -u
# The one-token 4-bit kernel (decode_layer_w4.cu; new binaries in .devcarry/bin, the previous commit's in
# .devcarry/bin_old): decode-layer + 4-bit + layer tests, memcheck of the decode-layer tests, A/B old vs new at M=1.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/r1; mkdir -p $R; t0=$(date +%s); B=$PWD/.devcarry/bin; BO=$PWD/.devcarry/bin_old
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*:*W4*:*LayerGpu*:EdgeGpu.*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure|error" $R/tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4
timeout 120 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayerW4*:DecodeLayerGpuEdge.*' > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3
timeout 200 python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$BO/fusedmoe-bench --variant new: --variant-bench new=$B/fusedmoe-bench \
  --order old,new,old,new,old,new --base old -- --preset qwen3-30b-a3b-tp1,gpt-oss-120b,gpt-oss-120b-interleaved --m 1 --formats mxfp4,nvfp4 \
  --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.log 2>&1; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
tail -25 $R/ab.log
gzip -9 $R/tests.log $R/memcheck.log
