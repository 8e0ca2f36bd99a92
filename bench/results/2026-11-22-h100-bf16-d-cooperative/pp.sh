set -u
R=$OUT/pp; mkdir -p $R; t0=$(date +%s)
B=.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt
python3 bench/ab.py run --bench $B/fusedmoe-bench --out $R/ab --variant pp:  --variant coop:FMOE_EXP_PP_MAXK=0 --order pp,coop,pp,coop -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1024,2048,4096 --formats bf16,fp8-tensor,fp8-channel --no-ceilings --check-tokens 2 --stage-runs 3 --max-minutes 0.8 > $R/ab.md 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\| " $R/ab.md | tail -n +3; tail -2 $R/ab.md | head -1
rm -rf $R/ab/*/routing; cd $R && tar czf runs.tgz ab && rm -rf ab
