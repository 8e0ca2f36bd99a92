set -u
# r2: the staged bf16 tile from 128 tokens only (N0 + N1 >= 128): tests, A/B against 8083b55.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha .devcarry/bin_base/sha >> $R/device.txt
timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='*W4*:*w4*:*Mxfp4*:*Nvfp4*:*mxfp4*:*nvfp4*:*Korder*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -3; gzip -9 $R/tests.log
timeout 330 python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_base/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new,old,new --base old -- \
  --preset gpt-oss-120b,qwen3-30b-a3b-tp1,deepseek-v3-tp1 --m 512,1024,4096 \
  --formats mxfp4,nvfp4,mxfp4-fp8 --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.4 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r2.tgz r2 && rm -rf r2
