set -u
# Stream GEMM wide token tile at two CTAs per SM (3 x 32 KB stages; fp8 without the per-stage
# promotion, as the CUTLASS FastAccum configs it replaces): FMOE_X_WIDE2=1 (where the wide tile runs
# now), =2 (also fp8 with k < 4096, e.g. Qwen3-30B-A3B at 64 rows per expert). Same-binary A/B.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha >> $R/device.txt
FMOE_X_WIDE2=2 timeout 100 $B/fusedmoe_gpu_tests --gtest_filter='*Layer*:*Edge*:-*Rules*' > $R/tests_wide2.log 2>&1; echo "tests(WIDE2=2) rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/tests_wide2.log | head -8; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests_wide2.log | tail -3; gzip -9 $R/tests_wide2.log
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
COMMON="--check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 1.5"
timeout 200 $AB --out $R/abA --variant base: --variant X1:FMOE_X_WIDE2=1 --variant X2:FMOE_X_WIDE2=2 \
  --order base,X1,X2,base,X1,X2 --base base -- \
  --preset mixtral-8x7b,qwen3-30b-a3b-tp1 --m 256,1024 --formats bf16,fp8-tensor,fp8-channel $COMMON > $R/abA.log 2>&1
echo "abA rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/abA.log
timeout 150 $AB --out $R/abB --variant base: --variant X1:FMOE_X_WIDE2=1 --variant X2:FMOE_X_WIDE2=2 \
  --order base,X1,X2,base,X1,X2 --base base -- \
  --preset deepseek-v3-tp1,deepseek-v3-tp8 --m 2048 --formats bf16,fp8-tensor $COMMON > $R/abB.log 2>&1
echo "abB rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/abB.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
