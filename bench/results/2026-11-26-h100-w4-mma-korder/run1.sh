set -u
# The 4-bit mma kernel's activations in its k order (KOrder::W4_MMA, w4_kperm.cuh): written so by
# the gather / activation kernels, no prmt in the kernel. base = c25a4f5 (bin_base), new = this
# change (bin). One device call: `bash run1.sh`.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha >> $R/device.txt
timeout 200 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "^\[==========\]|PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4
timeout 120 bash scripts/gpu_sanitize.sh $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck default subset rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[==========\].*ran|ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3
timeout 60 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='*W4Korder*' > $R/memcheck_korder.log 2>&1; echo "memcheck korder rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck_korder.log | tail -2
gzip -9 $R/gpu_tests.log $R/memcheck.log $R/memcheck_korder.log
timeout 200 python3 bench/ab.py run --out $R/ab --variant base: --variant-bench base=$PWD/.devcarry/bin_base/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order base,new,base,new --base base -- \
  --preset gpt-oss-120b,qwen3-30b-a3b-tp1,deepseek-v3-tp1 --m 8,16,32,64,128 \
  --formats mxfp4,nvfp4,w4a8-int4,nvfp4-w4a4 --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.4 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
