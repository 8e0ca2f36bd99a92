set -u
# The fp8 formats' grid again at 789c48c with a longer peer budget, so the PyTorch peers of
# fp8-tensor / fp8-channel / fp8-block are timed in the same run as fusedmoe.
# `bash peers_fp8.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; S=$(cat .devcarry/sha8)
R=$OUT/fp8peers; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
env FMB_PRESETS=mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 FMB_M=1,8,64,256,1024,4096 FMB_FORMATS=fp8-tensor,fp8-channel,fp8-block \
  FMB_BENCH_MINUTES=3 FUSEDMOE_COMMIT=$S FUSEDMOE_BENCH=$B/fusedmoe-bench FMB_WORK=/tmp/gw8 OUT=$R FMB_PEERS_MINUTES=4.5 \
  timeout 420 bash bench/run_gpu_bench.sh bench peers report > $R/grid.log 2>&1; echo "fp8 grid + peers rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ok,|SKIP" $R/grid.log | tail -2; rm -f $R/results.tar.gz
cd $OUT && tar czf fp8peers.tgz fp8peers && rm -rf fp8peers
