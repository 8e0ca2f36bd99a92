# usage: bash .devcarry/final.sh NAME FORMATS [tests]
set -u
NAME=$1; FORMATS=$2; TESTS=${3:-}
PRESETS=${PRESETS:-mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8}
K=$(cd .devcarry/kit && pwd); S=$(cat .devcarry/sha); t0=$(date +%s)
R=$OUT/$NAME; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; echo "sha $S (unmodified)" >> $R/device.txt
cd .devcarry/snap
FUSEDMOE_KIT=$K OUT=$R/check bash scripts/gpu_check.sh build $TESTS > $R/check_out.txt 2>&1; echo "check rc=$? $(( $(date +%s)-t0 ))s"
rm -f $R/check/build.log; tail -12 $R/check_out.txt
FUSEDMOE_COMMIT=$S FUSEDMOE_BENCH=$PWD/build-gpu/tools/bench/fusedmoe-bench FMB_WORK=/tmp/gridwork OUT=$R \
  FMB_PRESETS=$PRESETS FMB_M=1,8,64,256,1024,4096 FMB_FORMATS=$FORMATS FMB_BENCH_MINUTES=${FMB_BENCH_MINUTES:-4} FMB_PEERS_MINUTES=1 \
  FMB_REPEAT_PRESETS=deepseek-v3-tp8 FMB_REPEAT_M=1,64 FMB_REPEAT_FORMATS=${FORMATS%%,*} \
  bash bench/run_gpu_bench.sh bench repeat peers report 2>&1 | grep -E "run_gpu_bench|ok,|SKIP" | tail -12
echo "grid done $(( $(date +%s)-t0 ))s"
