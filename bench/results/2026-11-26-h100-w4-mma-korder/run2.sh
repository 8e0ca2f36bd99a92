set -u
# W4_MMA order for W4A8 (int4) only; MXFP4 / NVFP4 back to the in-kernel prmt. base = c25a4f5
# (bin_base), new = this state (bin). `bash run2.sh`.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha >> $R/device.txt
timeout 200 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "^\[==========\]|PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4; gzip -9 $R/gpu_tests.log
timeout 200 python3 bench/ab.py run --out $R/ab --variant base: --variant-bench base=$PWD/.devcarry/bin_base/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order base,new,base,new --base base -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp1 --m 8,16,32,64,128 \
  --formats mxfp4,nvfp4,w4a8-int4 --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.4 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r2.tgz r2 && rm -rf r2
