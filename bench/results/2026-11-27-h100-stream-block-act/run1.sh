set -u
# fp8-block GEMM1 + activation on the stream GEMM (few rows per expert): tests, A/B against the base commit.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha .devcarry/bin_base/sha >> $R/device.txt
timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='*StreamGemm*:*Gemm1BlockAct*:*Block*:*Edge*:*Layer*fp8_block*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -3; gzip -9 $R/tests.log
GTEST_FILTER='*StreamGemmBlockAct*:*Gemm1BlockActPathsGpu.StreamRange*' timeout 100 bash scripts/gpu_sanitize.sh $B/fusedmoe_gpu_tests > $R/memcheck_new.log 2>&1; echo "memcheck-new rc=$?"
grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck_new.log | tail -3; rm -f $R/memcheck.log
timeout 300 python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_base/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new --base old -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 --m 2,8,64,256,1024 \
  --formats fp8-block --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.4 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
