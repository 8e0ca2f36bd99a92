set -u
# The bf16 / fp8 grid with the PyTorch peers at this session's final binaries (the stream GEMM's tall tile, the
# one-token layer's row-contiguous loads) on an H100; SUITE=1 runs the GPU suite first.
# `bash bench/results/2026-11-27-h100-grid-tall/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R3=$OUT/grid; mkdir -p $R3
nvidia-smi --query-gpu=name,driver_version --format=csv > $R3/device.txt; cat $B/sha >> $R3/device.txt; date -u >> $R3/device.txt
if [ "${SUITE:-0}" = 1 ]; then timeout 200 $B/fusedmoe_gpu_tests > $R3/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
  grep -E "PASSED|FAILED  \]|SKIPPED \]" $R3/gpu_tests.log | tail -4 | tee $R3/gpu_tests_summary.txt; gzip -9 $R3/gpu_tests.log; fi
env FMB_PRESETS=mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 FMB_M=1,8,64,256,1024,4096 FMB_FORMATS=bf16,fp8-tensor,fp8-channel,fp8-block \
  FMB_BENCH_MINUTES=3 FUSEDMOE_COMMIT=$(cat $B/sha) FUSEDMOE_BENCH=$B/fusedmoe-bench FMB_WORK=/tmp/gw3 OUT=$R3 FMB_PEERS_MINUTES=1.5 \
  FMB_REPEAT_PRESETS=qwen3-30b-a3b-tp1 FMB_REPEAT_M=1 FMB_REPEAT_FORMATS=fp8-tensor \
  timeout 330 bash bench/run_gpu_bench.sh bench repeat peers report > $R3/grid.log 2>&1; echo "grid rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ok,|SKIP" $R3/grid.log | tail -2; rm -f $R3/results.tar.gz $R3/repeat.json
find $OUT -name "*.npy" -delete; find $OUT -type d -name routing | xargs -r rm -rf
echo "done $(( $(date +%s)-t0 ))s"
