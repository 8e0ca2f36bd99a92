set -u
# fp8-block GEMM1 + activation (blockwise mainloop, gated epilogue, bf16 rows, then the 1x128
# quantisation of them) against the unfused GEMM1 (fp32 h) + activation kernel. old = b64063c.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
$B/fusedmoe_gpu_tests --gtest_filter='*Gemm1BlockAct*:*Block*:*Gemm1Act*' > $R/tests.log 2>&1; echo "tests rc=$?"; grep -E "PASSED|FAILED|SKIPPED" $R/tests.log | tail -8
compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='*Gemm1BlockAct*' > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $R/memcheck.log | tail -3
python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_old/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new --base old -- \
  --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 --m 256,1024,4096 \
  --formats fp8-block --check-tokens 1 --no-ceilings --stage-runs 1 --max-minutes 1 > $R/ab.log 2>&1
echo "ab rc=$?"; sed -n '/| preset/,$p' $R/ab.log
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
