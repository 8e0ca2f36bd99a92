set -u
# Epilogue stores as 8-output vectors (quad transpose) for halves rows, in both fused GEMM1s (bf16 /
# fp8-tensor and the new fp8-block one); fp8-block fuses halves rows only. old = b64063c.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/r4; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_old/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new --base old -- \
  --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 --m 1024,4096 \
  --formats bf16,fp8-tensor --check-tokens 1 --no-ceilings --stage-runs 1 --max-minutes 2.5 > $R/ab.log 2>&1
echo "ab rc=$?"; sed -n '/| preset/,$p' $R/ab.log
cd $OUT && tar czf r4.tgz r4 && rm -rf r4
