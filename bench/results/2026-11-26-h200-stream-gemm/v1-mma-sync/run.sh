set -u
# stream GEMM (stream_gemm.cu) first run: its direct tests, the whole GPU suite, memcheck on the
# direct tests, then a same-call A/B of the layer against the base binary (CUTLASS swap-AB there).
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/res; mkdir -p $R; t0=$(date +%s)
B=$PWD/.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha $B/base_sha >> $R/device.txt; date -u >> $R/device.txt
GTEST_FILTER="StreamGemm*" timeout 120 $B/fusedmoe_gpu_tests > $R/stream_tests.log 2>&1; echo "stream tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|PASSED|FAILED  \]" $R/stream_tests.log | head -20
timeout 330 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
GTEST_FILTER="StreamGemm*" timeout 200 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3 | tee $R/memcheck_summary.txt
for run in 1 2; do
  for v in base new; do
    bin=$B/fusedmoe-bench; [ $v = base ] && bin=$B/fusedmoe-bench-base
    timeout 150 $bin --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,mixtral-8x7b,deepseek-v3-tp1 --m 8,64,256,512 --formats bf16,fp8-tensor,fp8-block --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 2 --out-dir /tmp/b-$v-$run > $R/ab-$v-$run.log 2>&1; echo "ab $v $run rc=$? $(( $(date +%s)-t0 ))s"
  done
done
gzip -9 $R/gpu_tests.log $R/memcheck.log
cd $OUT && tar czf res.tgz res && rm -rf res
