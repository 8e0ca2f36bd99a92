set -u
# Three binaries: old = 3c7e704 (bin_old: 9 cp.async per thread per stage), a = every copy by TMA
# with one box per warp (bin_a: /tmp build of the all-TMA variant, weights as 64-row x 32-byte
# boxes with the 32-byte swizzle), new = activations by TMA (one box per warp), weights by one
# cp.async per thread (bin). `bash run2.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha >> $R/device.txt
timeout 100 $B/fusedmoe_gpu_tests --gtest_filter='*W4*:*w4*:*Mxfp4*:*Nvfp4*:*mxfp4*:*nvfp4*:*Layer*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -3; gzip -9 $R/tests.log
timeout 300 python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_old/fusedmoe-bench \
  --variant a: --variant-bench a=$PWD/.devcarry/bin_a/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,a,new,old,a,new --base old -- \
  --preset gpt-oss-120b,qwen3-30b-a3b-tp1,deepseek-v3-tp1 --m 256,1024,4096 \
  --formats mxfp4,nvfp4 --check-tokens 1 --no-ceilings --stage-runs 1 --max-minutes 0.5 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r2.tgz r2 && rm -rf r2
