set -u
# The whole-block plan up to 256 slots (small_plan_block: plan_tiny_kernel and the plan_gather kernels) against
# the one-warp rule of 32 slots (FUSEDMOE_WIDE_PLAN=0), same binary: the GPU suite first, then the layer A/B
# interleaved three times each at 33-256 slots, then ncu of the 4-bit mma GEMMs at 8 tokens.
# `bash bench/results/2026-11-27-h100-wide-plan/run.sh 1` (suite, 4-bit A/B) and `... run.sh 2` (W4A8 and
# bf16 / fp8 A/B, ncu) from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/wpab; O=$OUT/wp${1:-1}; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
ab() {  # name presets m formats
  timeout ${ABT:-200} $AB --out $R/ab_$1 --variant off:FUSEDMOE_WIDE_PLAN=0 --variant on: --order off,on,off,on,off,on --base off -- \
    --preset $2 --m $3 --formats $4 --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes ${ABM:-0.3} > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $O/ab_$1.md
}
if [ "${1:-1}" = 1 ]; then
timeout 240 $B/fusedmoe_gpu_tests > $R/tests.log 2>&1
echo "suite rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\[  FAILED" $R/tests.log | head
grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4 | tee $O/tests_summary.txt
ABT=300 ab w4 qwen3-30b-a3b-tp1,gpt-oss-120b 8,16,32,64 mxfp4,nvfp4,mxfp4-fp8
gzip -c $R/tests.log > $O/tests.log.gz
else
ABT=150 ab w4a8 qwen3-30b-a3b-tp1,deepseek-v3-tp1 8,32 w4a8-int4
ABT=200 ab f16 qwen3-30b-a3b-tp1,deepseek-v3-tp8,mixtral-8x7b 8,32,64 bf16,fp8-tensor,fp8-channel
M="gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active"
nc() {  # preset format m
  timeout 100 ncu --kernel-name regex:w4_mma_kernel --launch-count 2 --metrics $M --section WarpStateStats --section LaunchStats --section Occupancy \
    $B/fusedmoe-bench --preset $1 --m $3 --formats $2 --routing uniform --no-ceilings --no-check \
    --stage-runs 0 --warmup 0 --min-reps 1 --max-reps 1 --rotate 1 --out-dir /tmp/ncu_x > /tmp/ncu_one.txt 2>&1
  echo "== $1 $2 M=$3 rc=$?"; sed -n '/w4_mma_kernel/,$p' /tmp/ncu_one.txt | grep -vE "^==PROF==|^ *-+ *$" | head -150
}
{ nc qwen3-30b-a3b-tp1 mxfp4 8; nc gpt-oss-120b mxfp4 8; } > $O/ncu_w4_mma.txt 2>&1
echo "ncu $(( $(date +%s)-t0 ))s"
fi
python3 bench/ab.py stages $R/ab_*/* > $O/ab_stages_$1.txt 2>&1
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $O/runs_$1.tgz -C $R $(cd $R && ls -d ab_* | grep -v '\.log$'); echo "done $(( $(date +%s)-t0 ))s"
