set -u
R=$OUT/nv1; mkdir -p $R; t0=$(date +%s)
B=.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt
GTEST_FILTER="E2m1Device.*:*Nvfp4*:*nvfp4*:*W4*" timeout 150 $B/fusedmoe_gpu_tests > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -3
if ! grep -q "FAILED  \]" $R/tests.log; then
python3 bench/ab.py run --variant-bench old=.devcarry/bin_old/fusedmoe-bench --variant-bench new=$B/fusedmoe-bench --out $R/ab \
  --variant old: --variant new: --order old,new,old,new -- \
  --preset gpt-oss-120b,deepseek-v3-tp1,qwen3-30b-a3b-tp1 --m 1,8,64,256,1024,4096 \
  --formats nvfp4-w4a4 --no-ceilings --check-tokens 2 --max-minutes 1 > $R/ab.md 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; tail -4 $R/ab.md
$B/fusedmoe-bench --preset deepseek-v3-tp1,qwen3-30b-a3b-tp1 --m 4096 --formats nvfp4-w4a4 --no-ceilings --no-check --max-minutes 0.3 --out-dir $R/stage > $R/stage.txt 2>&1; grep -A12 -i "stage" $R/stage.txt | head -20
fi
rm -rf $R/ab/*/routing $R/stage/routing
