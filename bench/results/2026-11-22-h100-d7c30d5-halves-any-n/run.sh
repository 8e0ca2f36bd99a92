set -u
# halves pairing for any even N (partial last tile): tests, memcheck, same-call A/B efc3aea vs new
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/res; mkdir -p $R; t0=$(date +%s)
B=$PWD/.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat .devcarry/bin/sha6 >> $R/device.txt; date -u >> $R/device.txt
timeout 300 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
GTEST_FILTER="*Gemm1Act*" timeout 150 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3 | tee $R/memcheck_summary.txt
for run in 1 2; do
  for v in efc3aea new; do
    timeout 100 $B/fusedmoe-bench-$v --preset gpt-oss-120b,qwen3-30b-a3b-tp1,mixtral-8x7b --m 1024,2048,4096 --formats bf16,fp8-tensor --check-tokens 2 --no-ceilings --stage-runs 0 --out-dir /tmp/b-$v-$run > $R/ab-$v-$run.log 2>&1; echo "ab $v $run rc=$? $(( $(date +%s)-t0 ))s"
  done
done
gzip -9 $R/gpu_tests.log $R/memcheck.log $R/ab-*.log
cd $OUT && tar czf res.tgz res && rm -rf res
