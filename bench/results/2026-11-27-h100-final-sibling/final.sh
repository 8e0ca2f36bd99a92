set -u
# The session's final code (the sibling sync on the bf16 / fp8 GEMM1 + activation; binaries of .devcarry/sha8) on
# an H100. `bash final.sh tests`: GPU suite and the memcheck default subset; `bash final.sh grid3`: the bf16 / fp8
# grid with the PyTorch peers. From the repository root on the device (as bench/results/2026-11-27-h100-final3/final.sh).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; S=$(cat .devcarry/sha8)
R=$OUT/final; R3=$OUT/final/grid3; mkdir -p $R $R3
for D in $R $R3; do nvidia-smi --query-gpu=name,driver_version --format=csv > $D/device.txt; echo "commit $S (binaries built from it)" >> $D/device.txt; date -u >> $D/device.txt; done
if [ "${1:-tests}" = tests ]; then
timeout 240 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
timeout 200 bash scripts/gpu_sanitize.sh $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[==========\].*ran|ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -4 | tee $R/memcheck_summary.txt
gzip -9 $R/gpu_tests.log $R/memcheck.log; rmdir $R3 2>/dev/null
else
env FMB_PRESETS=mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 FMB_M=1,8,64,256,1024,4096 FMB_FORMATS=bf16,fp8-tensor,fp8-channel,fp8-block \
  FMB_BENCH_MINUTES=3 FUSEDMOE_COMMIT=$S FUSEDMOE_BENCH=$B/fusedmoe-bench FMB_WORK=/tmp/gw3 OUT=$R3 FMB_PEERS_MINUTES=1.5 \
  FMB_REPEAT_PRESETS=qwen3-30b-a3b-tp1 FMB_REPEAT_M=1 FMB_REPEAT_FORMATS=fp8-tensor \
  timeout 400 bash bench/run_gpu_bench.sh bench repeat peers report > $R3/grid.log 2>&1; echo "grid3 rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ok,|SKIP" $R3/grid.log | tail -2; rm -f $R3/results.tar.gz $R3/repeat.json
find $R3 -name "*.npy" -delete; find $R3 -type d -name routing | xargs -r rm -rf
fi
cd $OUT && tar czf final.tgz final && rm -rf final
