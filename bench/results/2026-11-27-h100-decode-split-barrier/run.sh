set -u
# The one-token layer with split part barriers (only the epilogue warp waits for a task's partial
# sums) on an H100: its tests, racecheck + memcheck on them, the GPU suite, then a two-binary A/B
# at one token against 7b02e8e (bin_base).
# `bash bench/results/2026-11-27-h100-decode-split-barrier/run.sh` from the repository root.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/split; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 60 $B/fusedmoe_gpu_tests --gtest_filter='DecodeLayer*' > $R/decode_tests.log 2>&1; echo "decode tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|PASSED|FAILED  \]" $R/decode_tests.log | tail -4
GTEST_FILTER='DecodeLayerGpu*:DecodeLayerDynamicGpu*:DecodeLayerGpuEdge*' TOOLS="racecheck memcheck" timeout 150 bash scripts/gpu_sanitize.sh $B/fusedmoe_gpu_tests > $R/sanitize.log 2>&1; echo "sanitize rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard|PASSED|FAILED  \]|tests from.*ran" $R/sanitize.log | tail -8
timeout 200 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
gzip -9 $R/gpu_tests.log $R/sanitize.log
AB="python3 bench/ab.py run --variant-bench base=$PWD/.devcarry/bin_base/fusedmoe-bench --variant-bench new=$B/fusedmoe-bench"
timeout 150 $AB --out $R/ab --variant base: --variant new: --order base,new,base,new,base,new --base base -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,mixtral-8x7b,deepseek-v3-tp1 --m 1 --formats fp8-tensor,fp8-block,fp8-channel --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 0.35 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
