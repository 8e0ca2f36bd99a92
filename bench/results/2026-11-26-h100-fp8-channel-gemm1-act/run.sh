set -u
# fp8-channel GEMM1 + activation (per-channel dequant in the epilogue, bf16 rows, then the per-row
# quantisation of them) against GEMM1 to fp32 h + the activation kernel. old = 55cf753.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
$B/fusedmoe_gpu_tests --gtest_filter='*Gemm1*:*Channel*:*Layer*:*Edge*' > $R/tests.log 2>&1; echo "tests rc=$?"; grep -E "PASSED|FAILED|SKIPPED" $R/tests.log | tail -6
compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='*Gemm1ChannelAct*' > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $R/memcheck.log | tail -3
python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_old/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new --base old -- \
  --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8,gpt-oss-120b --m 256,1024,4096 \
  --formats fp8-channel --check-tokens 1 --no-ceilings --stage-runs 1 --max-minutes 2 > $R/ab.log 2>&1
echo "ab rc=$?"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
