set -u
# The stream GEMM's early start: with offsets final at launch (GEMM2 always; GEMM1 where the plan
# is its own kernel) each CTA finds its expert and issues its first ring stages' weight copies
# before griddepcontrol.wait, overlapping the previous kernel's tail. Two-binary A/B: base
# (782cc39, bin_base) and the change (bin).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha >> $R/device.txt
timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='*Stream*:*Layer*:*Edge*:*Fp8*:*Block*:*Channel*:*Decode*:*Graph*:*Determin*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/tests.log | head -8; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -3; gzip -9 $R/tests.log
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 1 $B/fusedmoe_gpu_tests --gtest_filter='*Stream*:*AlternatingRoutings*' > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3; gzip -9 $R/memcheck.log
AB="python3 bench/ab.py run --variant-bench base=$PWD/.devcarry/bin_base/fusedmoe-bench --variant-bench new=$B/fusedmoe-bench"
COMMON="--check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 1.5"
timeout 300 $AB --out $R/abA --variant base: --variant new: --order base,new,base,new --base base -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,deepseek-v3-tp1,mixtral-8x7b --m 8,64,256,1024 --formats bf16,fp8-tensor,fp8-block $COMMON > $R/abA.log 2>&1
echo "abA rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/abA.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
