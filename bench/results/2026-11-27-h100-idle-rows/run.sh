set -u
# IdleRowsMainloop (src/cuda/sm90_idle_rows_mainloop.cuh, GEMM1 + activation instances) on an H100: GPU suite, then a two-binary
# A/B against 73f8a6c (bin_base) at the large-M points whose experts' last tile is often short.
# `bash bench/results/2026-11-27-h100-idle-rows/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/idle; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 220 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
gzip -9 $R/gpu_tests.log
AB="python3 bench/ab.py run --variant-bench base=$PWD/.devcarry/bin_base/fusedmoe-bench --variant-bench new=$B/fusedmoe-bench"
timeout 330 $AB --out $R/ab --variant base: --variant new: --order base,new,base,new --base base -- \
  --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1024,2048,4096 --formats bf16,fp8-tensor,fp8-channel --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 1.0 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
