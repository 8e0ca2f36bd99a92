set -u
# L2 cache hints on the gathered GEMM1 (DeepSeek-V3 TP8-like shapes: GEMM1 + activation reads its A rows from the
# token-major input by cp.async; ncu had it reading 1.08 GB for ~0.97 GB of weights and input,
# ../2026-11-27-h100-large-m-ncu): FUSEDMOE_GATHER_L2=1 keeps x's lines (evict_last policy on the row copies),
# =2 also marks the weight tiles evict_first; 0 = an evict_normal policy (the same copies as before, hinted).
# head = 8a01820's binary (plain cp.async). ncu bytes first, then the layer A/B interleaved three times.
# `bash bench/results/2026-11-27-h100-gather-l2-hint/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/glh; mkdir -p $R $OUT/glh
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/glh/device.txt; cat $B/sha >> $OUT/glh/device.txt; date -u >> $OUT/glh/device.txt
timeout 120 $B/fusedmoe_gpu_tests --gtest_filter='*Gather*:*Gemm1*' > $R/tests.log 2>&1
echo "tests rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED" $R/tests.log | tail -6 | tee $OUT/glh/tests_summary.txt
M="gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct"
nc() {  # format m hint
  FUSEDMOE_GATHER_L2=$3 timeout 100 ncu --kernel-name device_kernel --launch-count 1 --metrics $M \
    $B/fusedmoe-bench --preset deepseek-v3-tp8 --m $2 --formats $1 --routing uniform --no-ceilings --no-check \
    --stage-runs 0 --warmup 0 --min-reps 1 --max-reps 1 --rotate 1 --out-dir /tmp/ncu_x > /tmp/ncu_one.txt 2>&1
  echo "== GEMM1 deepseek-v3-tp8 $1 M=$2 hint=$3 rc=$?"; grep -E "gpu__time|dram__bytes|hit_rate" /tmp/ncu_one.txt | sed 's/^ *//'
}
{ for h in 0 1 2; do nc fp8-tensor 4096 $h; nc bf16 4096 $h; done; } > $OUT/glh/ncu.txt 2>&1
echo "ncu $(( $(date +%s)-t0 ))s"; cat $OUT/glh/ncu.txt
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench --variant-bench head=$B/bench_head"
timeout 300 $AB --out $R/ab --variant head: --variant h0:FUSEDMOE_GATHER_L2=0 --variant h1:FUSEDMOE_GATHER_L2=1 --variant h2:FUSEDMOE_GATHER_L2=2 \
  --order head,h0,h1,h2,head,h0,h1,h2,head,h0,h1,h2 --base head -- \
  --preset deepseek-v3-tp8 --m 1024,2048,4096 --formats bf16,fp8-tensor,fp8-channel --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.5 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log | tee $OUT/glh/ab.md
python3 bench/ab.py stages $R/ab/* > $OUT/glh/ab_stages.txt 2>&1
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/glh/runs.tgz -C $R ab ; echo "done $(( $(date +%s)-t0 ))s"
