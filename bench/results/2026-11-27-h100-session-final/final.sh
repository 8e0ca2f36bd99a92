set -u
# The session's final code (cff5fcf + the stream GEMM's fp8-block activation scales loaded through
# L2, committed with this folder) on an H100: GPU suite, memcheck default subset, a two-binary A/B
# of the fp8-block stream points against cff5fcf (bin_base), the bf16 / fp8 grid with peers.
# `bash final.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; S=$(cat .devcarry/sha8)
R=$OUT/final; R3=$OUT/final/grid3; mkdir -p $R $R3
for D in $R $R3; do nvidia-smi --query-gpu=name,driver_version --format=csv > $D/device.txt; cat $B/sha >> $D/device.txt; date -u >> $D/device.txt; done
timeout 200 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
timeout 130 bash scripts/gpu_sanitize.sh $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[==========\].*ran|ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -4 | tee $R/memcheck_summary.txt
gzip -9 $R/gpu_tests.log $R/memcheck.log
AB="python3 bench/ab.py run --variant-bench base=$PWD/.devcarry/bin_base/fusedmoe-bench --variant-bench new=$B/fusedmoe-bench"
timeout 120 $AB --out $R/abA --variant base: --variant new: --order base,new,base,new --base base -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 8,64,256,1024 --formats fp8-block --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 1.0 > $R/abA.log 2>&1
echo "abA rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/abA.log
env FMB_PRESETS=mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 FMB_M=1,8,64,256,1024,4096 FMB_FORMATS=bf16,fp8-tensor,fp8-channel,fp8-block \
  FMB_BENCH_MINUTES=3 FUSEDMOE_COMMIT=$S FUSEDMOE_BENCH=$B/fusedmoe-bench FMB_WORK=/tmp/gw3 OUT=$R3 FMB_PEERS_MINUTES=1.5 \
  FMB_REPEAT_PRESETS=qwen3-30b-a3b-tp1 FMB_REPEAT_M=1 FMB_REPEAT_FORMATS=fp8-tensor \
  timeout 250 bash bench/run_gpu_bench.sh bench repeat peers report > $R3/grid.log 2>&1; echo "grid3 rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ok,|SKIP" $R3/grid.log | tail -2; rm -f $R3/results.tar.gz
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf final.tgz final && rm -rf final
