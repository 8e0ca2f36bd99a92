set -u
# The non-4-bit formats' gather / activation stages with the korder argument (b4e4f3c, bin) against
# the same tree with KOrder::NATURAL as a constant at those call sites (bin_nat): the runtime k
# order must not cost the bf16 / fp8 layers anything. `bash run1.sh`.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt
timeout 200 python3 bench/ab.py run --out $R/ab --variant nat: --variant-bench nat=$PWD/.devcarry/bin_nat/fusedmoe-bench \
  --variant korder: --variant-bench korder=$PWD/.devcarry/bin/fusedmoe-bench --order nat,korder,nat,korder --base nat -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 64,256,4096 \
  --formats bf16,fp8-tensor,fp8-channel,fp8-block --check-tokens 1 --no-ceilings --stage-runs 3 --max-minutes 0.4 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
