set -u
# r2: + W4A4 GEMM1 + activation (bf16 rows, quantise_bf16_nvfp4_kernel). Token-major nvfp4 (W4A4) gather:
# every slot row with that scale, against the per-row gather (old = 96c4b93's binary).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/r2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
t0=$(date +%s)
timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='*GatherTokenPaths*:*GatherNvfp4*:*W4*:*nvfp4*:*Nvfp4*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\[  FAILED" $R/tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4
timeout 90 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='*GatherTokenPaths*nvfp4*:W4WgmmaActGpu.*' > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"; grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3
timeout 300 python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_old/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new --base old -- \
  --preset gpt-oss-120b,qwen3-30b-a3b-tp1,deepseek-v3-tp1 --m 256,1024,4096 \
  --formats nvfp4-w4a4,nvfp4 --check-tokens 1 --no-ceilings --stage-runs 1 --max-minutes 1 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete
cd $OUT && tar czf r2.tgz r2 && rm -rf r2
