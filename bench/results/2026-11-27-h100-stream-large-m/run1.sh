set -u
# The stream GEMM's wide token tile past 64 rows per expert (FMOE_X_STREAM_WIDE_ROWS: the bound;
# 100000 = every bf16 / fp16 / fp8-without-block-scales large-M GEMM), with the token batches of one
# weight run split over adjacent CTAs (FMOE_X_STREAM_SPLIT=-1: cover 1.25x the expected rows).
# Same-binary A/B against the CUTLASS large-M configs.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha >> $R/device.txt
FMOE_X_STREAM_WIDE_ROWS=100000 FMOE_X_STREAM_SPLIT=-1 timeout 120 $B/fusedmoe_gpu_tests --gtest_filter='*Layer*:*Edge*:*Stream*:-*Rules*' > $R/tests_x.log 2>&1; echo "tests(X) rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/tests_x.log | head -8; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests_x.log | tail -3; gzip -9 $R/tests_x.log
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
COMMON="--check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 1.5"
timeout 260 $AB --out $R/abA --variant base: --variant W:FMOE_X_STREAM_WIDE_ROWS=100000 --variant WS:FMOE_X_STREAM_WIDE_ROWS=100000,FMOE_X_STREAM_SPLIT=-1 \
  --order base,W,WS,base,W,WS --base base -- \
  --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 --m 1024,4096 --formats bf16,fp8-tensor $COMMON > $R/abA.log 2>&1
echo "abA rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/abA.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
