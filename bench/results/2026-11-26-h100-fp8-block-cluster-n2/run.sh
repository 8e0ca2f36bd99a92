set -u
# The blockwise GEMM1 + activation and GEMM2 (bf16 D) instances with clusters of two CTAs along N
# sharing the activation tile by TMA multicast, against the same code with single-CTA clusters.
# old = 38c8245 (= 1cd90d8's library).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/rc; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
$B/fusedmoe_gpu_tests --gtest_filter='*Gemm1BlockAct*:*Block*:*Layer*' > $R/tests.log 2>&1; echo "tests rc=$?"; grep -E "PASSED|FAILED|SKIPPED" $R/tests.log | tail -6
python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_old/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new --base old -- \
  --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 --m 256,1024,4096 \
  --formats fp8-block --check-tokens 1 --no-ceilings --stage-runs 1 --max-minutes 2 > $R/ab.log 2>&1
echo "ab rc=$?"; sed -n '/| preset/,$p' $R/ab.log
cd $OUT && tar czf rc.tgz rc && rm -rf rc
