set -u
# At the commit in .devcarry/sha8 (binaries built from it): GPU suite, memcheck default subset, then the 4-bit grid
# at M = 1 and 8 (gpt-oss-120b, Qwen3-30B-A3B, DeepSeek-V3 TP1 x mxfp4, nvfp4, mxfp4-fp8, nvfp4-w4a4, w4a8-int4) with peers + report.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/f; mkdir -p $R; t0=$(date +%s); B=$PWD/.devcarry/bin; S=$(cat .devcarry/sha8)
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 200 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
timeout 110 bash scripts/gpu_sanitize.sh $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[==========\].*ran|ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -4 | tee $R/memcheck_summary.txt
G="FMB_PRESETS=gpt-oss-120b,qwen3-30b-a3b-tp1,deepseek-v3-tp1 FMB_M=1,8 FMB_FORMATS=mxfp4,nvfp4,mxfp4-fp8,nvfp4-w4a4,w4a8-int4 FMB_BENCH_MINUTES=1.5"
env $G FUSEDMOE_COMMIT=$S FUSEDMOE_BENCH=$B/fusedmoe-bench FMB_WORK=/tmp/gw OUT=$R FMB_PEERS_MINUTES=0.7 FMB_REPEAT_PRESETS=qwen3-30b-a3b-tp1 FMB_REPEAT_M=1 FMB_REPEAT_FORMATS=mxfp4 \
  timeout 250 bash bench/run_gpu_bench.sh bench repeat peers report > $R/grid.log 2>&1; echo "grid rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ok,|SKIP" $R/grid.log | tail -2; rm -f $R/results.tar.gz
gzip -9 $R/gpu_tests.log $R/memcheck.log
cd $OUT && tar czf f.tgz f && rm -rf f
