set -u
# This session's final binaries on an H100: the gather tests and the GPU suite, a same-binary A/B of the stream GEMM1
# gather under AUTO against FUSEDMOE_GEMM1_GATHER=0, then the bf16 / fp8 grid with the PyTorch peers (GRID=0 skips it).
# `bash bench/results/2026-11-27-h100-final-grid/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/final; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 240 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
grep -E "Gemm1GatherGpu" $R/gpu_tests.log | grep -E "OK|FAILED" | head -12 > $R/gather_tests.txt; gzip -9 $R/gpu_tests.log
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
timeout 120 $AB --out $R/ab --variant permuted:FUSEDMOE_GEMM1_GATHER=0 --variant auto: --order permuted,auto,permuted,auto --base permuted -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 --m 256,1024 --formats bf16,fp8-tensor,fp8-channel --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 0.4 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
if [ "${GRID:-1}" = 1 ]; then
R3=$OUT/grid; mkdir -p $R3; cp $R/device.txt $R3/
env FMB_PRESETS=mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 FMB_M=1,8,64,256,1024,4096 FMB_FORMATS=bf16,fp8-tensor,fp8-channel,fp8-block \
  FMB_BENCH_MINUTES=3 FUSEDMOE_COMMIT=$(cat $B/sha) FUSEDMOE_BENCH=$B/fusedmoe-bench FMB_WORK=/tmp/gw3 OUT=$R3 FMB_PEERS_MINUTES=1.5 \
  FMB_REPEAT_PRESETS=qwen3-30b-a3b-tp1 FMB_REPEAT_M=1 FMB_REPEAT_FORMATS=fp8-tensor \
  timeout 290 bash bench/run_gpu_bench.sh bench repeat peers report > $R3/grid.log 2>&1; echo "grid rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ok,|SKIP" $R3/grid.log | tail -2; rm -f $R3/results.tar.gz $R3/repeat.json
find $OUT -name "*.npy" -delete; find $OUT -type d -name routing | xargs -r rm -rf
fi
