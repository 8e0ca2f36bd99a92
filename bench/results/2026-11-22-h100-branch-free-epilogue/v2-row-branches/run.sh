set -u
# branch-free fused epilogue: *Gemm1Act* tests, GPU suite, memcheck; same-call A/B: 819eed0 (unfused), cd25584 (halves fused), new (branch-free epilogue)
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/res; mkdir -p $R; t0=$(date +%s)
B=$PWD/.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat .devcarry/bin/sha6 >> $R/device.txt; date -u >> $R/device.txt
GTEST_FILTER="*Gemm1Act*" timeout 120 $B/fusedmoe_gpu_tests > $R/gemm1act.log 2>&1; echo "gemm1act rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure|PASSED|FAILED  \]" $R/gemm1act.log | head -20
timeout 300 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
P=qwen3-30b-a3b-tp1,deepseek-v3-tp8,deepseek-v3-tp1,mixtral-8x7b,gpt-oss-120b-interleaved
for run in 1 2; do
  for v in 819eed0 cd25584 new; do
    timeout 100 $B/fusedmoe-bench-$v --preset $P --m 1024,2048,4096 --formats bf16,fp8-tensor --check-tokens 2 --no-ceilings --stage-runs 0 --out-dir /tmp/b-$v-$run > $R/ab-$v-$run.log 2>&1; echo "ab $v $run rc=$? $(( $(date +%s)-t0 ))s"
  done
done
timeout 200 $B/fusedmoe-bench-new --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1 --m 4096 --formats fp8-tensor,bf16 --check-tokens 2 --no-ceilings --stage-runs 5 --out-dir /tmp/st > $R/stages-new.log 2>&1; echo "stages rc=$?"
GTEST_FILTER="*Gemm1Act*" timeout 150 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3 | tee $R/memcheck_summary.txt
gzip -9 $R/gpu_tests.log $R/memcheck.log $R/ab-*.log
cd $OUT && tar czf res.tgz res && rm -rf res
