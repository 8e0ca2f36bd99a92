set -u
# Review mends (no behaviour change intended): the staged-row quantiser shared by the one-token
# fp8 and 4-bit kernels (quantise_staged_row), the read flush on hbm_read_kernel. old = 7263475.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt
$B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*:*Edge*' > $R/tests.log 2>&1; echo "tests rc=$?"; grep -E "PASSED|FAILED" $R/tests.log | tail -4
compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*' > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $R/memcheck.log | tail -3
$B/fusedmoe-bench --preset qwen3-30b-a3b-tp1 --m 1 --formats fp8-channel --stage-runs 0 --check-tokens 1 --max-minutes 1 --out-dir $R/ceil > $R/ceil.log 2>&1; echo "ceil rc=$?"
python3 -c "import json;c=json.load(open('$R/ceil/fusedmoe-bench.json'));print('read ceiling', round(c['ceilings']['hbm_read_tbps'],3), 'flush', c['method']['flush_mode'])"
python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_old/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new,old,new --base old -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,gpt-oss-120b --m 1 \
  --formats fp8-channel,mxfp4-fp8,w4a8-int4,fp8-tensor --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.log 2>&1
echo "ab rc=$?"; sed -n '/| preset/,$p' $R/ab.log
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
