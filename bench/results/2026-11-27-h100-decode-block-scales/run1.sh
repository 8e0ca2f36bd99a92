set -u
# One-token fp8-block kernel: both k groups' weight scales loaded next to the weight loads. Tests, A/B at one token.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha .devcarry/bin_base/sha >> $R/device.txt
timeout 120 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*:*Block*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -3; gzip -9 $R/tests.log
timeout 400 python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_base/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new,old,new --base old -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,deepseek-v3-tp1,mixtral-8x7b --m 1 \
  --formats fp8-block,fp8-tensor --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 0.5 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
