set -u
# Bulk (cp.async.bulk.prefetch.L2, 16 KB) against per-line (prefetch.global.L2::evict_last) prefetch.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/ab2; mkdir -p $R; B=$PWD/.devcarry/bin; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 200 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/ab1 --variant base:FMOE_PF=0 --variant bulkw2:FMOE_PF=1 --variant linew2:FMOE_PF=1,FMOE_PF_LINE=1 --variant lineall:FMOE_PF=3,FMOE_PF_LINE=1 --order base,bulkw2,linew2,lineall,base,bulkw2,linew2,lineall --base base -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1,2 --formats bf16,fp8-tensor,fp8-block --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.md 2> $R/ab.err; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
cut -d'|' -f2,3,5,14- $R/ab.md | tail -16
for V in "FMOE_PF=1" "FMOE_PF=1 FMOE_PF_LINE=1"; do
env $V timeout 60 ncu --launch-skip 40 --launch-count 8 --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_lookup_hit.sum,lts__t_sectors_srcunit_tex_lookup_miss.sum --csv $B/fusedmoe-bench --preset qwen3-30b-a3b-tp1 --m 1 --formats fp8-tensor --no-ceilings --stage-runs 0 --check-tokens 1 --max-reps 10 --graph-max-m 0 --flush-mb 0 --out-dir /tmp/b > "$R/ncu_$V.csv" 2>&1; echo "ncu $V rc=$?"
done
