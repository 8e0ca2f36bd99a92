set -u
# Stream GEMM knobs (same binary): FMOE_X_FP8WIDE (1: fp8 128-row token tile at 49-64 rows; 2: only
# k >= 4096), FMOE_X_BIGHALVES (GEMM1 + activation for halves > 32 MB apart on the wide tile),
# FMOE_X_EARLYSCALES (fp8-block: the producer loads a stage's scales before waiting for the slot).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha >> $R/device.txt
F='*Stream*:*Layer*:*Edge*:*Block*'
FMOE_X_FP8WIDE=1 FMOE_X_EARLYSCALES=1 timeout 100 $B/fusedmoe_gpu_tests --gtest_filter="$F" > $R/tests_w1e.log 2>&1; echo "tests(W1E) rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/tests_w1e.log | head -8; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests_w1e.log | tail -3; gzip -9 $R/tests_w1e.log
FMOE_X_FP8WIDE=2 FMOE_X_BIGHALVES=1 FMOE_X_EARLYSCALES=1 timeout 100 $B/fusedmoe_gpu_tests --gtest_filter="$F" > $R/tests_w2he.log 2>&1; echo "tests(W2HE) rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/tests_w2he.log | head -8; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests_w2he.log | tail -3; gzip -9 $R/tests_w2he.log
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
COMMON="--check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 1.5"
timeout 170 $AB --out $R/abA --variant base: --variant W2:FMOE_X_FP8WIDE=2 --variant W2H:FMOE_X_FP8WIDE=2,FMOE_X_BIGHALVES=1 \
  --variant W2HE:FMOE_X_FP8WIDE=2,FMOE_X_BIGHALVES=1,FMOE_X_EARLYSCALES=1 --order base,W2,W2H,W2HE,base,W2,W2H,W2HE --base base -- \
  --preset mixtral-8x7b --m 256 --formats bf16,fp8-tensor,fp8-channel,fp8-block $COMMON > $R/abA.log 2>&1
echo "abA rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/abA.log
timeout 170 $AB --out $R/abB --variant base: --variant E:FMOE_X_EARLYSCALES=1 --variant W1E:FMOE_X_FP8WIDE=1,FMOE_X_EARLYSCALES=1 \
  --order base,E,W1E,base,E,W1E --base base -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 --m 256,1024 --formats fp8-block $COMMON > $R/abB.log 2>&1
echo "abB rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/abB.log
timeout 120 $AB --out $R/abC --variant base: --variant W2:FMOE_X_FP8WIDE=2 --variant W2HE:FMOE_X_FP8WIDE=2,FMOE_X_BIGHALVES=1,FMOE_X_EARLYSCALES=1 \
  --order base,W2,W2HE,base,W2,W2HE --base base -- \
  --preset deepseek-v3-tp1 --m 2048 --formats fp8-tensor,fp8-block $COMMON > $R/abC.log 2>&1
echo "abC rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/abC.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
