set -u
R=$OUT/y2; mkdir -p $R; t0=$(date +%s)
B=.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt
python3 bench/ab.py run --bench $B/fusedmoe-bench --out $R/ab --variant y32:FMOE_AB_Y32=1 --variant y16: --order y32,y16,y32,y16 -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,mixtral-8x7b,deepseek-v3-tp1 --m 256,1024,4096 \
  --formats bf16,fp8-tensor,fp8-channel --no-ceilings --check-tokens 4 --max-minutes 1.1 > $R/ab.md 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; tail -4 $R/ab.md
rm -rf $R/ab/*/routing
