set -u
# ef10d5c: GPU suite, memcheck on the fused GEMM1 + activation tests, halves vs interleaved A/B (same binary)
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/res; mkdir -p $R; t0=$(date +%s)
B=$PWD/.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat .devcarry/sha6 >> $R/device.txt; date -u >> $R/device.txt
timeout 300 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
GTEST_FILTER="*Gemm1Act*:Formats/LongKGpu.*" timeout 120 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3 | tee $R/memcheck_summary.txt
P=qwen3-30b-a3b-tp1,qwen3-30b-a3b-tp1-interleaved,deepseek-v3-tp8,deepseek-v3-tp8-interleaved,deepseek-v3-tp1,deepseek-v3-tp1-interleaved,mixtral-8x7b,mixtral-8x7b-interleaved
timeout 150 $B/fusedmoe-bench --preset $P --m 1024,4096 --formats bf16,fp8-tensor --check-tokens 2 --commit ef10d5c --out-dir $R/run1 > $R/run1.log 2>&1; echo "run1 rc=$? $(( $(date +%s)-t0 ))s"
timeout 120 $B/fusedmoe-bench --preset $P --m 1024,4096 --formats bf16,fp8-tensor --check-tokens 2 --no-ceilings --commit ef10d5c --out-dir $R/run2 > $R/run2.log 2>&1; echo "run2 rc=$? $(( $(date +%s)-t0 ))s"
rm -rf $R/run1/routing $R/run2/routing
gzip -9 $R/gpu_tests.log $R/memcheck.log
