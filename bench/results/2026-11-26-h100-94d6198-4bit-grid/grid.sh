set -u
# The full 4-bit grid (issue 6: gpt-oss-120b, DeepSeek-V3 TP1, Qwen3-30B-A3B x five formats x M 1..4096) with peers, at the commit in .devcarry/sha8.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/grid; mkdir -p $R; t0=$(date +%s)
B=$PWD/.devcarry/bin
S=$(cat .devcarry/sha8)
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; echo "commit $S (binaries built from it, unmodified)" >> $R/device.txt; date -u >> $R/device.txt
FUSEDMOE_COMMIT=$S FUSEDMOE_BENCH=$B/fusedmoe-bench FMB_WORK=/tmp/gridwork OUT=$R \
  FMB_PRESETS=gpt-oss-120b,deepseek-v3-tp1,qwen3-30b-a3b-tp1 FMB_M=1,8,64,256,1024,4096 FMB_FORMATS=w4a8-int4,mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4 \
  FMB_BENCH_MINUTES=4.5 FMB_PEERS_MINUTES=1.5 FMB_REPEAT_PRESETS=qwen3-30b-a3b-tp1 FMB_REPEAT_M=8 FMB_REPEAT_FORMATS=mxfp4 \
  timeout 560 bash bench/run_gpu_bench.sh bench repeat peers report > $R/grid.log 2>&1; echo "grid rc=$? $(( $(date +%s)-t0 ))s"
grep -E "run_gpu_bench|ok,|SKIP" $R/grid.log | tail -8
cp /tmp/gridwork/repeat/fusedmoe-bench.json $R/repeat-bench.json 2>/dev/null; rm -f $R/results.tar.gz
cd $OUT && tar czf grid.tgz grid && rm -rf grid
