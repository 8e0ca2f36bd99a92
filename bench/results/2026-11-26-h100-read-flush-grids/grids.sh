set -u
# The issue-3 grid (bf16, fp8-tensor, fp8-channel, fp8-block x 4 presets x M 1..4096) and the
# issue-6 4-bit grid (gpt-oss-120b, DeepSeek-V3 TP1, Qwen3-30B-A3B x 5 formats), both with peers,
# with the L2 read flush (fusedmoe-bench's default since d34c6e4), binaries of .devcarry/sha8.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; S=$(cat .devcarry/sha8)
R3=$OUT/grid3; R6=$OUT/grid6; mkdir -p $R3 $R6
for R in $R3 $R6; do nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; echo "commit $S (binaries built from it)" >> $R/device.txt; date -u >> $R/device.txt; done
env FMB_PRESETS=mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 FMB_M=1,8,64,256,1024,4096 FMB_FORMATS=bf16,fp8-tensor,fp8-channel,fp8-block \
  FMB_BENCH_MINUTES=3 FUSEDMOE_COMMIT=$S FUSEDMOE_BENCH=$B/fusedmoe-bench FMB_WORK=/tmp/gw3 OUT=$R3 FMB_PEERS_MINUTES=0.7 \
  FMB_REPEAT_PRESETS=qwen3-30b-a3b-tp1 FMB_REPEAT_M=1 FMB_REPEAT_FORMATS=fp8-tensor \
  timeout 280 bash bench/run_gpu_bench.sh bench repeat peers report > $R3/grid.log 2>&1; echo "grid3 rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ok,|SKIP" $R3/grid.log | tail -2; rm -f $R3/results.tar.gz
env FMB_PRESETS=gpt-oss-120b,deepseek-v3-tp1,qwen3-30b-a3b-tp1 FMB_M=1,8,64,256,1024,4096 FMB_FORMATS=w4a8-int4,mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4 \
  FMB_BENCH_MINUTES=3.5 FUSEDMOE_COMMIT=$S FUSEDMOE_BENCH=$B/fusedmoe-bench FMB_WORK=/tmp/gw6 OUT=$R6 FMB_PEERS_MINUTES=1.2 \
  FMB_REPEAT_PRESETS=qwen3-30b-a3b-tp1 FMB_REPEAT_M=8 FMB_REPEAT_FORMATS=mxfp4 \
  timeout 290 bash bench/run_gpu_bench.sh bench repeat peers report > $R6/grid.log 2>&1; echo "grid6 rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ok,|SKIP" $R6/grid.log | tail -2; rm -f $R6/results.tar.gz
cp /tmp/gw3/repeat/fusedmoe-bench.json $R3/repeat-bench.json 2>/dev/null; cp /tmp/gw6/repeat/fusedmoe-bench.json $R6/repeat-bench.json 2>/dev/null
cd $OUT && tar czf grids.tgz grid3 grid6 && rm -rf grid3 grid6
