set -u
R=$OUT/f9; mkdir -p $R; t0=$(date +%s)
B=.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt
GTEST_FILTER="*FinalizePaths*:*LayerGpu*fp8_channel*:*LongNGpu*:*LargeGpu*:*LongKGpu*:*SmallMFinalize*:*Fp8Block*" timeout 150 $B/fusedmoe_gpu_tests > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"; grep -E "PASSED|FAILED  \]" $R/tests.log | tail -3
GTEST_FILTER="*FinalizePaths*:*LongNGpu*:*LongKGpu*" timeout 100 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/san.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED  \] [0-9]" $R/san.log | tail -3 | tee $R/memcheck_summary.txt
python3 bench/ab.py run --variant-bench old=.devcarry/bin_old/fusedmoe-bench --variant-bench new=$B/fusedmoe-bench --out $R/ab \
  --variant old:FMOE_EXP_PP_MAXK=0 --variant new: --order old,new,old,new -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,mixtral-8x7b,deepseek-v3-tp1 --m 1024,4096 --formats bf16,fp8-tensor,fp8-channel --no-ceilings --check-tokens 2 --stage-runs 3 --max-minutes 0.8 > $R/ab.md 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\| " $R/ab.md | tail -n +3; tail -2 $R/ab.md | head -1
rm -rf $R/ab/*/routing; cd $R && tar czf all.tgz ab *.log && rm -rf ab *.log
