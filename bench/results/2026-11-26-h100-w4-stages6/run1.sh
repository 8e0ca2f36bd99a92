set -u
# w4_wgmma.cu with 6 stages (prefetch distance 4) instead of 5, now that the weight tile is 4 KB:
# base = c25a4f5 (bin_base), new = the same with kStages = 6 (bin). `bash run1.sh`.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha >> $R/device.txt
timeout 200 python3 bench/ab.py run --out $R/ab --variant base: --variant-bench base=$PWD/.devcarry/bin_base/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order base,new,base,new --base base -- \
  --preset gpt-oss-120b,qwen3-30b-a3b-tp1,deepseek-v3-tp1 --m 256,1024,4096 \
  --formats mxfp4,nvfp4 --check-tokens 1 --no-ceilings --stage-runs 1 --max-minutes 0.5 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
