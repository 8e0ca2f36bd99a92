set -u
R=$OUT/y3; mkdir -p $R; t0=$(date +%s)
B=.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt
GTEST_FILTER="*Fp8Block*:*FinalizePaths*:*LongNGpu*" timeout 150 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/san.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED" $R/san.log | tail -3 | tee $R/memcheck_summary.txt
timeout 200 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
FMOE_AB_Y32=1 GTEST_FILTER="*Fp8Block*" timeout 60 $B/fusedmoe_gpu_tests > $R/gpu_tests_y32.log 2>&1; echo "y32 rc=$? $(( $(date +%s)-t0 ))s"
python3 bench/ab.py run --bench $B/fusedmoe-bench --out $R/ab --variant y32:FMOE_AB_Y32=1 --variant y16: --order y32,y16,y32,y16 -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,deepseek-v3-tp1 --m 1024,4096 \
  --formats fp8-block --no-ceilings --check-tokens 4 --max-minutes 0.6 > $R/ab.md 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; tail -3 $R/ab.md
python3 bench/ab.py run --bench $B/fusedmoe-bench --out $R/abmx --variant y32:FMOE_AB_Y32=1 --variant y16: --order y32,y16,y32,y16,y32,y16 -- \
  --preset mixtral-8x7b --m 4096 --formats bf16,fp8-tensor,fp8-channel --no-ceilings --check-tokens 2 --stage-runs 5 --max-minutes 0.6 > $R/abmx.md 2>&1
echo "abmx rc=$? $(( $(date +%s)-t0 ))s"; tail -3 $R/abmx.md
rm -rf $R/ab*/*/routing; cd $R && tar czf runs.tgz ab abmx && rm -rf ab abmx
