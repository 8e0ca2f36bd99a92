set -u
# Second A/B of the same binaries: DeepSeek-V3 TP1 at 2048 / 4096 tokens (noisy in r1), gpt-oss 2048, Qwen3 512, interleaved x 3.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha .devcarry/bin_base/sha >> $R/device.txt
timeout 500 python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_base/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new,old,new --base old -- \
  --preset deepseek-v3-tp1,gpt-oss-120b,qwen3-30b-a3b-tp1 --m 512,2048,4096 \
  --formats mxfp4,nvfp4 --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.4 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r2.tgz r2 && rm -rf r2
