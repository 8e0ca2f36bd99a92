set -u
R=$OUT/il1; mkdir -p $R; t0=$(date +%s)
B=.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt
timeout 250 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
if ! grep -q "FAILED  \]" $R/gpu_tests.log; then
python3 bench/ab.py run --variant-bench old=.devcarry/bin_old/fusedmoe-bench --variant-bench new=$B/fusedmoe-bench --out $R/ab --variant old: --variant new: --order old,new,old,new -- \
  --preset gpt-oss-120b-interleaved,gpt-oss-120b --m 1,64,1024,4096 \
  --formats mxfp4,nvfp4,mxfp4-fp8,bf16 --no-ceilings --check-tokens 2 --max-minutes 1 > $R/ab.md 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; tail -4 $R/ab.md
GTEST_FILTER="ActivationTensorPaths*:*W4Gpu*" timeout 200 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/san.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED" $R/san.log | tail -3 | tee $R/memcheck_summary.txt
fi
rm -rf $R/ab/*/routing
