set -u
# The one-block routing plan (plan_small_kernel) up to 4096 slots (was 1024; beyond, the count /
# scan / place kernels). old = 3c7e704's binaries (bin_old), new = this change (bin).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha >> $R/device.txt
timeout 200 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "^\[==========\]|PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4
timeout 60 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='PlanGpu.*:PlanGather*' > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -2
gzip -9 $R/gpu_tests.log $R/memcheck.log
timeout 280 python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_old/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new --base old -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,mixtral-8x7b --m 256,512,1024 \
  --formats bf16,fp8-tensor,fp8-block --check-tokens 1 --no-ceilings --stage-runs 3 --max-minutes 0.5 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
