set -u
R=$OUT/mma2; mkdir -p $R; t0=$(date +%s)
python3 bench/ab.py run --variant-bench old=.devcarry/bin_old/fusedmoe-bench --variant-bench c0=.devcarry/bin_c0/fusedmoe-bench --variant-bench c1=.devcarry/bin/fusedmoe-bench --out $R/ab \
  --variant old: --variant c0: --variant c1: --order old,c0,c1,old,c0,c1 -- \
  --preset gpt-oss-120b,deepseek-v3-tp1,qwen3-30b-a3b-tp1 --m 1,8,64,256 \
  --formats mxfp4,nvfp4 --no-ceilings --check-tokens 2 --max-minutes 0.5 > $R/ab.md 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; tail -4 $R/ab.md
B=.devcarry/bin_c0/fusedmoe-bench
MET="--metrics smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,gpu__time_duration.sum,smsp__warps_active.avg.per_cycle_active,l1tex__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio"
for b in bin_old bin_c0 bin; do timeout 60 ncu --kernel-name regex:w4_mma --launch-count 1 $MET .devcarry/$b/fusedmoe-bench --preset deepseek-v3-tp1 --m 64 --formats mxfp4 --no-ceilings --no-check --max-minutes 0.05 --out-dir $R/c > $R/ncu_$b.txt 2>&1; echo "== $b"; grep -E "^    [a-z]" $R/ncu_$b.txt; done
rm -rf $R/ab/*/routing $R/c
