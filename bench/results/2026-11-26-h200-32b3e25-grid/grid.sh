set -u
# Issue-3 grid at 32b3e25 (fusedmoe-bench built from it, unmodified), preceded by the direct
# stream-GEMM tests of the test binary with the fp8 tolerance of the next commit.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/grid; mkdir -p $R; t0=$(date +%s)
B=$PWD/.devcarry/bin
S=$(cat .devcarry/sha8)
GTEST_FILTER="*StreamGemm*" timeout 60 $B/fusedmoe_gpu_tests --gtest_output=xml:$R/stream_tests.xml > $R/stream_tests.log 2>&1; echo "stream tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|PASSED|FAILED  \]" $R/stream_tests.log | head
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; echo "commit $S (binaries built from it, unmodified)" >> $R/device.txt; date -u >> $R/device.txt
FUSEDMOE_COMMIT=$S FUSEDMOE_BENCH=$B/fusedmoe-bench FMB_WORK=/tmp/gridwork OUT=$R \
  FMB_PRESETS=mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 FMB_M=1,8,64,256,1024,4096 FMB_FORMATS=bf16,fp8-tensor,fp8-channel,fp8-block \
  FMB_BENCH_MINUTES=4.2 FMB_PEERS_MINUTES=1 FMB_REPEAT_PRESETS=deepseek-v3-tp8 FMB_REPEAT_M=256 FMB_REPEAT_FORMATS=fp8-tensor \
  timeout 530 bash bench/run_gpu_bench.sh bench repeat peers report > $R/grid.log 2>&1; echo "grid rc=$? $(( $(date +%s)-t0 ))s"
grep -E "run_gpu_bench|ok,|SKIP" $R/grid.log | tail -8
cp /tmp/gridwork/repeat/fusedmoe-bench.json $R/repeat-bench.json 2>/dev/null; rm -f $R/results.tar.gz
cd $OUT && tar czf grid.tgz grid && rm -rf grid
