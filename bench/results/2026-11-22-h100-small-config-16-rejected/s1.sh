set -u
R=$OUT/s1; mkdir -p $R; t0=$(date +%s)
B=.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt
run() {  # name presets mlist
  python3 bench/ab.py run --bench $B/fusedmoe-bench --out $R/ab_$1 --variant s32: --variant s16:FMOE_EXP_SMALL_MAX=16 --order s32,s16,s32,s16 -- \
    --preset $2 --m $3 --formats bf16,fp8-tensor,fp8-block --no-ceilings --check-tokens 2 --max-minutes 0.6 > $R/ab_$1.md 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\| " $R/ab_$1.md | tail -n +3; tail -2 $R/ab_$1.md | head -1
}
run ds deepseek-v3-tp8,deepseek-v3-tp1 768,1024
run qwen qwen3-30b-a3b-tp1 384,512
run mx mixtral-8x7b 96,128
rm -rf $R/ab_*/*/routing; cd $R && tar czf runs.tgz ab_ds ab_qwen ab_mx && rm -rf ab_ds ab_qwen ab_mx
