set -u
# The same binaries on interleaved gate / up rows (one weight region per tile) of the preset shapes:
# does the fused GEMM1's slowdown follow the distance of the halves or the tile shape?
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/r2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_old/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new --base old -- \
  --preset none --shape name=mixtral-il,E=8,topk=2,K=4096,N=14336,interleaved=1 \
  --shape name=qwen3-il,E=128,topk=8,K=2048,N=768,interleaved=1 \
  --shape name=dsv3-tp1-il,E=256,topk=8,K=7168,N=2048,interleaved=1 --m 256,1024,4096 \
  --formats fp8-block --check-tokens 1 --no-ceilings --stage-runs 1 --max-minutes 1 > $R/ab.log 2>&1
echo "ab rc=$?"; sed -n '/| preset/,$p' $R/ab.log
cd $OUT && tar czf r2.tgz r2 && rm -rf r2
