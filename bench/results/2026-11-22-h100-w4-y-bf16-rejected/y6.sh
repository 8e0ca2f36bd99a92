set -u
R=$OUT/y6; mkdir -p $R; t0=$(date +%s)
B=.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt
GTEST_FILTER="*W4*:*FinalizePaths*" timeout 150 $B/fusedmoe_gpu_tests > $R/w4_tests.log 2>&1; echo "w4 tests rc=$? $(( $(date +%s)-t0 ))s"; grep -E "PASSED|FAILED  \]" $R/w4_tests.log | tail -3
FMOE_AB_Y32=1 GTEST_FILTER="*W4*" timeout 150 $B/fusedmoe_gpu_tests > $R/w4_tests_y32.log 2>&1; echo "w4 y32 rc=$? $(( $(date +%s)-t0 ))s"
GTEST_FILTER="W4WgmmaGpu.*:*W4Gpu*" timeout 150 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/san.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED  \] [0-9]" $R/san.log | tail -3 | tee $R/memcheck_summary.txt
python3 bench/ab.py run --bench $B/fusedmoe-bench --out $R/ab --variant y32:FMOE_AB_Y32=1 --variant y16: --order y32,y16,y32,y16 -- \
  --preset gpt-oss-120b,deepseek-v3-tp1,qwen3-30b-a3b-tp1 --m 1024,4096 \
  --formats mxfp4,nvfp4,nvfp4-w4a4,mxfp4-fp8 --no-ceilings --check-tokens 2 --max-minutes 0.8 > $R/ab.md 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\| " $R/ab.md | tail -n +3; tail -2 $R/ab.md | head -1
rm -rf $R/ab/*/routing; cd $R && tar czf all.tgz ab *.log && rm -rf ab *.log
