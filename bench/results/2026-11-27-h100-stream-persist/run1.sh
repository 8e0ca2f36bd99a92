set -u
# Stream GEMM: persistent CTAs (FMOE_X_PERSIST=1 wide tile / 2 every tile) and the 128-row token
# tile for fp8 at 49-64 rows per expert (FMOE_X_FP8WIDE=1): tests under the knobs, same-binary A/B.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha >> $R/device.txt
FMOE_X_PERSIST=2 FMOE_X_FP8WIDE=1 timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='*Stream*:*Layer*:*Edge*' > $R/tests_knobs.log 2>&1; echo "tests(knobs) rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/tests_knobs.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests_knobs.log | tail -3; gzip -9 $R/tests_knobs.log
timeout 420 python3 bench/ab.py run --bench $B/fusedmoe-bench --out $R/ab --variant base: --variant W:FMOE_X_FP8WIDE=1 \
  --variant WP1:FMOE_X_FP8WIDE=1,FMOE_X_PERSIST=1 --variant WP2:FMOE_X_FP8WIDE=1,FMOE_X_PERSIST=2 --variant P2:FMOE_X_PERSIST=2 \
  --order base,W,WP1,WP2,P2,base,W,WP1,WP2,P2 --base base -- \
  --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 --m 256,1024 \
  --formats bf16,fp8-tensor,fp8-block --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 1.5 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
