set -u
R=$OUT/y4; mkdir -p $R; t0=$(date +%s)
B=.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt
for F in "*FinalizePaths*:*LongNGpu*:*LargeGpu*:*LongKGpu*" "*Fp8Block*"; do
  GTEST_FILTER="$F" timeout 200 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/san.log 2>&1; echo "memcheck [$F] rc=$? $(( $(date +%s)-t0 ))s"
  grep -E "ERROR SUMMARY|PASSED|FAILED  \] [0-9]|tests ran" $R/san.log | tail -3 | tee -a $R/memcheck_summary.txt
  grep -m12 -E "Invalid|Error|error|FAILED|RUN" $R/san.log | head -12
  mv $R/san.log $R/san_$(echo $F | tr -dc 'A-Za-z' | head -c 20).log
done
GTEST_FILTER="*FinalizePaths*:*LongNGpu*:*LayerGpu*:*Fp8Block*" timeout 100 $B/fusedmoe_gpu_tests > $R/gpu_tests_subset.log 2>&1; echo "subset rc=$? $(( $(date +%s)-t0 ))s"; grep -E "PASSED|FAILED  \]" $R/gpu_tests_subset.log | tail -2
python3 bench/ab.py run --bench $B/fusedmoe-bench --out $R/ab --variant y32:FMOE_AB_Y32=1 --variant y16: --order y32,y16,y32,y16 -- \
  --preset mixtral-8x7b,deepseek-v3-tp8 --m 4096 --formats bf16,fp8-channel --no-ceilings --check-tokens 2 --stage-runs 5 --max-minutes 0.5 > $R/ab.md 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; tail -7 $R/ab.md
rm -rf $R/ab/*/routing; cd $R && tar czf all.tgz *.log ab && rm -rf ab *.log
