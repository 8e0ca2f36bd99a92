set -u
R=$OUT/gc1; mkdir -p $R; t0=$(date +%s)
B=.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt
GTEST_FILTER="*W4*" timeout 200 $B/fusedmoe_gpu_tests > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -3
python3 bench/ab.py run --variant-bench old=.devcarry/bin_old/fusedmoe-bench --variant-bench new=$B/fusedmoe-bench --out $R/ab --variant old: --variant new: --order old,new,old,new,old,new -- \
  --preset gpt-oss-120b,deepseek-v3-tp1,qwen3-30b-a3b-tp1 --m 256,1024,4096 \
  --formats mxfp4,nvfp4,nvfp4-w4a4 --no-ceilings --check-tokens 2 --max-minutes 1 > $R/ab.md 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; tail -4 $R/ab.md
$B/fusedmoe-bench --preset gpt-oss-120b-interleaved --m 1,64,4096 --formats mxfp4 --no-ceilings --check-tokens 4 --max-minutes 0.3 --out-dir $R/il > $R/il.txt 2>&1; echo "il rc=$?"; grep -E "ok,|FAIL" $R/il.txt | tail -2
rm -rf $R/ab/*/routing $R/il/routing
