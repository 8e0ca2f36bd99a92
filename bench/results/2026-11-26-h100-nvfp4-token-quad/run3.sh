set -u
# The activation's nvfp4 quantise pass (quantise_bf16_nvfp4_kernel: W4A4 GEMM2 operand at large
# batches) with the same quad exchange. base = 8f12707 (bin_base), new = this change (bin).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r3; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha >> $R/device.txt
timeout 60 $B/fusedmoe_gpu_tests --gtest_filter='*W4Wgmma*:*W4Korder*:*Nvfp4*:*nvfp4*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/tests.log | head; grep -E "PASSED|FAILED  \]" $R/tests.log | tail -2; gzip -9 $R/tests.log
timeout 60 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='W4WgmmaActGpu.Nvfp4*' > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -2; gzip -9 $R/memcheck.log
timeout 120 python3 bench/ab.py run --out $R/ab --variant base: --variant-bench base=$PWD/.devcarry/bin_base/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order base,new,base,new --base base -- \
  --preset gpt-oss-120b,qwen3-30b-a3b-tp1,deepseek-v3-tp1 --m 1024,4096 \
  --formats nvfp4-w4a4 --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.4 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r3.tgz r3 && rm -rf r3
