set -u
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/tests; mkdir -p $R; t0=$(date +%s)
B=$PWD/.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat .devcarry/sha6 >> $R/device.txt; date -u >> $R/device.txt
timeout 330 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
GTEST_FILTER="*W4*:*w4*:*Int4*:*Nvfp4*:*nvfp4*:LayerGpu.*" timeout 220 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3 | tee $R/memcheck_summary.txt
timeout 120 $B/fusedmoe-bench --preset deepseek-v3-tp1,qwen3-30b-a3b-tp1 --m 16,256,1024,4096 --formats w4a8-int4 --no-ceilings --check-tokens 2 --max-minutes 0.5 --out-dir /tmp/bb > $R/bench.log 2>&1; echo "bench rc=$?"; grep -E "ok,|FAIL|SKIP" $R/bench.log | tail -3
gzip -9 $R/gpu_tests.log $R/memcheck.log
cd $OUT && tar czf tests.tgz tests && rm -rf tests
