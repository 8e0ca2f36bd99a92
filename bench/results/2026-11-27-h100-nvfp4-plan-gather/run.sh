set -u
# The nvfp4 (W4A4) gather with the routing plan inside (plan_gather_nvfp4_vec_kernel) and the wide plan, against
# FUSEDMOE_WIDE_PLAN=0 (the rule before 2026-11-27), same binary: the GPU suite and the memcheck default subset
# first, then the layer A/B interleaved, then ncu of the one-token 4-bit kernel and the 4-bit mma GEMMs.
# `bash bench/results/2026-11-27-h100-nvfp4-plan-gather/run.sh` from the repository root on the device;
# everything lands in $OUT/np.tgz.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/npab; O=/tmp/np; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
timeout 200 $B/fusedmoe_gpu_tests > $R/tests.log 2>&1
echo "suite rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\[  FAILED" $R/tests.log | head
grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4 | tee $O/tests_summary.txt
timeout 150 bash scripts/gpu_sanitize.sh $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[==========\].*ran|ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -4 | tee $O/memcheck_summary.txt
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
timeout 150 $AB --out $R/ab_w4a4 --variant off:FUSEDMOE_WIDE_PLAN=0 --variant on: --order off,on,off,on,off,on --base off -- \
  --preset qwen3-30b-a3b-tp1,gpt-oss-120b,deepseek-v3-tp1 --m 1,8,16,64 --formats nvfp4-w4a4 --check-tokens 2 --no-ceilings \
  --stage-runs 1 --max-minutes 0.3 > $R/ab_w4a4.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_w4a4.log | tee $O/ab_w4a4.md
python3 bench/ab.py stages $R/ab_*/* > $O/ab_stages.txt 2>&1
M="gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active"
nc() {  # kernel-regex preset format m count
  timeout 100 ncu --kernel-name regex:$1 --launch-count $5 --metrics $M --section WarpStateStats --section LaunchStats --section Occupancy \
    $B/fusedmoe-bench --preset $2 --m $4 --formats $3 --routing uniform --no-ceilings --no-check \
    --stage-runs 0 --warmup 0 --min-reps 1 --max-reps 1 --rotate 1 --out-dir /tmp/ncu_x > /tmp/ncu_one.txt 2>&1
  echo "== $1 $2 $3 M=$4 rc=$?"; grep -vE "^==PROF==|^ *-+ *$|^\[" /tmp/ncu_one.txt | sed -n '/decode_layer\|w4_mma/,$p' | head -160
}
{ nc decode_layer qwen3-30b-a3b-tp1 mxfp4 1 1; nc w4_mma_kernel qwen3-30b-a3b-tp1 mxfp4 8 2; nc w4_mma_kernel gpt-oss-120b mxfp4 8 2; } > $O/ncu.txt 2>&1
echo "ncu $(( $(date +%s)-t0 ))s"
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
gzip -c $R/tests.log > $O/tests.log.gz; gzip -c $R/memcheck.log > $O/memcheck.log.gz
tar czf $O/runs.tgz -C $R ab_w4a4
tar czf $OUT/np.tgz -C /tmp np; echo "done $(( $(date +%s)-t0 ))s"
