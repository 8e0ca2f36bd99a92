set -u
# fp8-block on the stream GEMM's wide token tile (128 rows, 6 stages at one CTA per SM, per-stage
# promotion) at 49-64 rows per expert, now that its wgmmas are no longer serialised (C7511):
# FMOE_X_BLOCK_WIDE=1. Same-binary A/B.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha >> $R/device.txt
FMOE_X_BLOCK_WIDE=1 timeout 120 $B/fusedmoe_gpu_tests --gtest_filter='*Layer*:*Edge*:*Block*:*Stream*:-*Rules*' > $R/tests_x.log 2>&1; echo "tests(X) rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/tests_x.log | head -8; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests_x.log | tail -3; gzip -9 $R/tests_x.log
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
COMMON="--check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 1.5"
timeout 240 $AB --out $R/abA --variant base: --variant W:FMOE_X_BLOCK_WIDE=1 --order base,W,base,W,base,W --base base -- \
  --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 --m 256,1024,2048 --formats fp8-block $COMMON > $R/abA.log 2>&1
echo "abA rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/abA.log
# Also: M = 1 without the one-token layer kernel (FMOE_X_NO_DECODE=1: the kernel chain, whose
# GEMM1 + activation runs on the stream GEMM's deep-ring instance that C7511 serialised until now).
FMOE_X_NO_DECODE=1 timeout 100 $B/fusedmoe_gpu_tests --gtest_filter='*Layer*:*Edge*:-*Rules*:*Decode*' > $R/tests_nd.log 2>&1; echo "tests(ND) rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/tests_nd.log | head -8; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests_nd.log | tail -3; gzip -9 $R/tests_nd.log
timeout 150 $AB --out $R/abB --variant base: --variant ND:FMOE_X_NO_DECODE=1 --order base,ND,base,ND,base,ND --base base -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1 --formats fp8-tensor,fp8-block,fp8-channel $COMMON > $R/abB.log 2>&1
echo "abB rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/abB.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
