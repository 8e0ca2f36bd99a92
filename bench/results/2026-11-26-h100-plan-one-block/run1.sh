set -u
# The routing plan in one block up to 4096 slots (new) instead of up to 1024 (old = aff12e2):
# plan / gather / layer / edge tests, memcheck of the plan tests, interleaved A/B (L2 read flush).
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt
$B/fusedmoe_gpu_tests --gtest_filter='*Plan*:*Gather*:*LayerGpu*:*Edge*:*Large*' > $R/tests.log 2>&1; echo "tests rc=$?"; grep -E "PASSED|FAILED" $R/tests.log | tail -4
compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='PlanGpu.*:Cases/PlanGather*' > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $R/memcheck.log | tail -3
python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_old/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new,old,new --base old -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,mixtral-8x7b --m 64,128,256,512,1024 \
  --formats fp8-tensor,bf16 --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1.2 > $R/ab.log 2>&1
echo "ab rc=$?"; sed -n '/| preset/,$p' $R/ab.log
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
