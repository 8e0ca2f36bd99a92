set -u
# The state at the end of 2026-11-27 (the one-token layers' half-major task order and parallel top-k sum; binaries of .devcarry/sha8) on an H100.
# `bash bench/results/2026-11-27-h100-late-grids/final.sh`: the 4-bit grid and the bf16 / fp8 grid with peers (tests: ../2026-11-27-h100-decode-tail/suite, same kernels).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; S=$(cat .devcarry/sha8)
R=$OUT/final; R3=$OUT/final/grid3; R6=$OUT/final/grid6; mkdir -p $R $R3 $R6
for D in $R $R3 $R6; do nvidia-smi --query-gpu=name,driver_version --format=csv > $D/device.txt; echo "commit $S (binaries built from it)" >> $D/device.txt; date -u >> $D/device.txt; done
env FMB_PRESETS=gpt-oss-120b,deepseek-v3-tp1,qwen3-30b-a3b-tp1 FMB_M=1,8,64,256,1024,4096 FMB_FORMATS=w4a8-int4,mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4 \
  FMB_BENCH_MINUTES=3 FUSEDMOE_COMMIT=$S FUSEDMOE_BENCH=$B/fusedmoe-bench FMB_WORK=/tmp/gw6 OUT=$R6 FMB_PEERS_MINUTES=1.2 \
  FMB_REPEAT_PRESETS=qwen3-30b-a3b-tp1 FMB_REPEAT_M=8 FMB_REPEAT_FORMATS=mxfp4 \
  timeout 230 bash bench/run_gpu_bench.sh bench repeat peers report > $R6/grid.log 2>&1; echo "grid6 rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ok,|SKIP" $R6/grid.log | tail -2; rm -f $R6/results.tar.gz
env FMB_PRESETS=mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 FMB_M=1,8,64,256,1024,4096 FMB_FORMATS=bf16,fp8-tensor,fp8-channel,fp8-block \
  FMB_BENCH_MINUTES=3 FUSEDMOE_COMMIT=$S FUSEDMOE_BENCH=$B/fusedmoe-bench FMB_WORK=/tmp/gw3 OUT=$R3 FMB_PEERS_MINUTES=0.7 \
  FMB_REPEAT_PRESETS=qwen3-30b-a3b-tp1 FMB_REPEAT_M=1 FMB_REPEAT_FORMATS=fp8-tensor \
  timeout 280 bash bench/run_gpu_bench.sh bench repeat peers report > $R3/grid.log 2>&1; echo "grid3 rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ok,|SKIP" $R3/grid.log | tail -2; rm -f $R3/results.tar.gz
find $R3 $R6 -name "*.npy" -delete; find $R3 $R6 -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf final.tgz final && rm -rf final
