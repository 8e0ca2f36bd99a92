set -u
R=$OUT/grid; mkdir -p $R; t0=$(date +%s)
B=$PWD/.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; echo "commit 56f09ea (binaries built from it, unmodified)" >> $R/device.txt; date -u >> $R/device.txt
timeout 200 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
FUSEDMOE_COMMIT=56f09ea FUSEDMOE_BENCH=$B/fusedmoe-bench FMB_WORK=/tmp/gridwork OUT=$R \
  FMB_PRESETS=gpt-oss-120b,gpt-oss-120b-interleaved,deepseek-v3-tp1,qwen3-30b-a3b-tp1 FMB_M=1,8,64,256,1024,4096 FMB_FORMATS=mxfp4,nvfp4,mxfp4-fp8,nvfp4-w4a4 \
  FMB_BENCH_MINUTES=5 FMB_PEERS_MINUTES=1 FMB_REPEAT_PRESETS=qwen3-30b-a3b-tp1 FMB_REPEAT_M=1024 FMB_REPEAT_FORMATS=mxfp4 \
  timeout 480 bash bench/run_gpu_bench.sh bench repeat peers report > $R/grid.log 2>&1; echo "grid rc=$? $(( $(date +%s)-t0 ))s"
grep -E "run_gpu_bench|ok,|SKIP" $R/grid.log | tail -8
cp /tmp/gridwork/repeat/fusedmoe-bench.json $R/repeat-bench.json 2>/dev/null; rm -f $R/results.tar.gz; ls $R
