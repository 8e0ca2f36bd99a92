set -u
# Stream GEMM 64-row token tile for fp8 without block scales summing the whole k in the wgmma's
# registers (no per-stage promotion: FMOE_X_FASTACC=1, the FP8FastAccum numerics): tests under the
# switch, same-binary A/B interleaved x 2.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha >> $R/device.txt
FMOE_X_FASTACC=1 timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='*StreamGemm*:*Layer*:*Edge*:*StreamChannelAct*:*Gemm1Act*:-*Rules*' > $R/tests_fastacc.log 2>&1; echo "tests(FASTACC) rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/tests_fastacc.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests_fastacc.log | tail -3; gzip -9 $R/tests_fastacc.log
timeout 400 python3 bench/ab.py run --bench $B/fusedmoe-bench --out $R/ab --variant base: --variant fast:FMOE_X_FASTACC=1 \
  --order base,fast,base,fast --base base -- \
  --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 --m 8,64,256,1024 \
  --formats fp8-tensor,fp8-channel --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 2 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
