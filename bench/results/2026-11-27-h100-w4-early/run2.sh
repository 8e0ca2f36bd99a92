set -u
# run2: the early start kept for MXFP4 only (the int4 / NVFP4 instances' SASS identical to
# fa02313's). Tests of the 4-bit and layer paths, memcheck of the 4-bit mma tests, two-binary A/B.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha >> $R/device.txt
timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='*W4*:*Mxfp4*:*MXFP4*:*Nvfp4*:*Layer*:*Edge*:*Decode*:*Stream*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/tests.log | head -8; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -3; gzip -9 $R/tests.log
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 1 $B/fusedmoe_gpu_tests --gtest_filter='*W4Gpu*:*W4GpuEdge*:*AlternatingRoutings*' > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3; gzip -9 $R/memcheck.log
AB="python3 bench/ab.py run --variant-bench base=$PWD/.devcarry/bin_base/fusedmoe-bench --variant-bench new=$B/fusedmoe-bench"
COMMON="--check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 1.5"
timeout 250 $AB --out $R/abA --variant base: --variant new: --order base,new,base,new --base base -- \
  --preset gpt-oss-120b,qwen3-30b-a3b-tp1,deepseek-v3-tp1 --m 8,64,256 --formats mxfp4,mxfp4-fp8,nvfp4 $COMMON > $R/abA.log 2>&1
echo "abA rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/abA.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r2.tgz r2 && rm -rf r2
