set -u
R=$OUT/prof; mkdir -p $R; t0=$(date +%s)
B=.devcarry/bin/fusedmoe-bench
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > $R/env.txt
M="--metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,smsp__warps_active.avg.per_cycle_active,smsp__warps_eligible.avg.per_cycle_active,launch__registers_per_thread,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active"
for f in mxfp4 nvfp4; do
 for pm in "deepseek-v3-tp1 64" "gpt-oss-120b 8" "gpt-oss-120b 1"; do set -- $pm
  timeout 120 ncu --kernel-name regex:w4_mma --launch-count 2 $M $B --preset $1 --m $2 --formats $f --no-ceilings --no-check --max-minutes 0.05 --out-dir $R/c > $R/ncu_${f}_$1_$2.txt 2>&1; echo "$f $1 $2 rc=$? $(( $(date +%s)-t0 ))s"
 done
done
timeout 150 ncu --kernel-name regex:w4_wgmma --launch-skip 2 --launch-count 2 $M $B --preset deepseek-v3-tp1 --m 4096 --formats mxfp4 --no-ceilings --no-check --max-minutes 0.05 --out-dir $R/c > $R/ncu_wgmma.txt 2>&1; echo "wgmma rc=$? $(( $(date +%s)-t0 ))s"
for f in $R/ncu_*.txt; do echo "== $f"; grep -E "w4_|stalled|issue_active|inst_executed|dram__|duration|warps_|registers|grid_size" $f | grep -v "^==PROF" | awk '{ if ($NF+0 > 0.05 || $0 ~ /w4_|duration|inst|grid|regis/) print }' | head -80; done
