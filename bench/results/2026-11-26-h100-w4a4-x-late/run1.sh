set -u
# One-token W4A4 kernel: x quantised per slot after the first GEMM1 loads are issued (new)
# instead of before them (old = 6540c28). Tests, memcheck, interleaved A/B at one token.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt
$B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*:*Edge*' > $R/tests.log 2>&1; echo "tests rc=$?"; grep -E "PASSED|FAILED" $R/tests.log | tail -4
compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*' > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $R/memcheck.log | tail -3
python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_old/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new,old,new,old,new --base old -- \
  --preset qwen3-30b-a3b-tp1,gpt-oss-120b --m 1 \
  --formats nvfp4-w4a4,nvfp4,mxfp4-fp8 --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.log 2>&1
echo "ab rc=$?"; sed -n '/| preset/,$p' $R/ab.log
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
