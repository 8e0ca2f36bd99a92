set -u
# Clusters of two CTAs along N (activation tile multicast) in every large-M instance: the
# fp8-block ones (GEMM1 + activation, fp32-D and bf16-D GEMMs) and the 128x256 cooperative
# bf16 / fp8 configs (plain, bf16 D, GEMM1 + activation). old = 38c8245.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/rc2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
$B/fusedmoe_gpu_tests --gtest_filter='*Gemm1*:*Block*:*Layer*:*Edge*:*Sm90*:*Grouped*' > $R/tests.log 2>&1; echo "tests rc=$?"; grep -E "PASSED|FAILED|SKIPPED" $R/tests.log | tail -6
python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_old/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new --base old -- \
  --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8,gpt-oss-120b --m 1024,4096 \
  --formats bf16,fp8-tensor,fp8-block --check-tokens 1 --no-ceilings --stage-runs 1 --max-minutes 2 > $R/ab.log 2>&1
echo "ab rc=$?"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete
cd $OUT && tar czf rc2.tgz rc2 && rm -rf rc2
