set -u
R=$OUT/thr; mkdir -p $R; t0=$(date +%s)
B=.devcarry/bin/fusedmoe-bench-thr
python3 bench/ab.py run --bench $B --out $R/ab --variant r32: --variant r16:FMOE_W4_MINROWS=16 --variant r8:FMOE_W4_MINROWS=8 --order r32,r16,r8,r32,r16,r8 -- \
  --preset gpt-oss-120b,deepseek-v3-tp1,qwen3-30b-a3b-tp1 --m 128,256,512 \
  --formats mxfp4,nvfp4 --no-ceilings --check-tokens 2 --max-minutes 0.5 > $R/ab.md 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; tail -4 $R/ab.md
MET="--section SpeedOfLight --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__warps_eligible.avg.per_cycle_active"
timeout 120 ncu --kernel-name regex:w4_wgmma --launch-skip 2 --launch-count 2 $MET $B --preset deepseek-v3-tp1 --m 4096 --formats mxfp4 --no-ceilings --no-check --max-minutes 0.05 --out-dir $R/c > $R/ncu_wgmma.txt 2>&1; echo "ncu rc=$?"
grep -E "w4_|issue_active|inst_executed|Duration|Compute \(SM\)|Memory Through|eligible" $R/ncu_wgmma.txt; grep stalled $R/ncu_wgmma.txt | awk '$NF+0 > 0.1' | sed 's/smsp__average_warps_issue_stalled_//'
rm -rf $R/ab/*/routing $R/c
