set -u
# The fused GEMM1 + activation's sibling sync (GatherAMainloop::sibling_sync: the CTAs of one weight column's
# M tiles start each tile together) against none (FUSEDMOE_SIBLING_SYNC=0), same binary: tests first, then
# ncu DRAM bytes of GEMM1 both ways, then the layer A/B interleaved three times each.
# `bash bench/results/2026-11-27-h100-sibling-sync/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/ssab; mkdir -p $R $OUT/ss
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/ss/device.txt; cat $B/sha >> $OUT/ss/device.txt; date -u >> $OUT/ss/device.txt
timeout 200 $B/fusedmoe_gpu_tests --gtest_filter='*Gemm1*:*Layer*:*Gather*:*Edge*:*Graph*' > $R/tests.log 2>&1
echo "tests rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|FAILED" $R/tests.log | tail -15 | tee $OUT/ss/tests_summary.txt
M="gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct"
nc() {  # preset format m routing sync
  FUSEDMOE_SIBLING_SYNC=$5 timeout 100 ncu --kernel-name device_kernel --launch-count 1 --metrics $M \
    $B/fusedmoe-bench --preset $1 --m $3 --formats $2 --routing $4 --no-ceilings --no-check \
    --stage-runs 0 --warmup 0 --min-reps 1 --max-reps 1 --rotate 1 --out-dir /tmp/ncu_x > /tmp/ncu_one.txt 2>&1
  echo "== GEMM1 $1 $2 M=$3 $4 sync=$5 rc=$?"; grep -E "gpu__time|dram__bytes|hit_rate" /tmp/ncu_one.txt | sed 's/^ *//'
}
{ for s in 0 1; do nc mixtral-8x7b bf16 1024 uniform $s; nc mixtral-8x7b bf16 1028 balanced $s; nc qwen3-30b-a3b-tp1 fp8-tensor 4096 uniform $s; nc deepseek-v3-tp8 fp8-tensor 4096 uniform $s; done; } > $OUT/ss/ncu.txt 2>&1
echo "ncu $(( $(date +%s)-t0 ))s"; cat $OUT/ss/ncu.txt
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
ab() {  # name presets m formats
  timeout ${ABT:-200} $AB --out $R/ab_$1 --variant off:FUSEDMOE_SIBLING_SYNC=0 --variant on: --order off,on,off,on,off,on --base off -- \
    --preset $2 --m $3 --formats $4 --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes ${ABM:-0.5} > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $OUT/ss/ab_$1.md
}
ab main mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp8 1024,4096 bf16,fp8-tensor,fp8-channel
ABT=150 ab ds1 deepseek-v3-tp1 4096 fp8-tensor,fp8-channel
python3 bench/ab.py stages $R/ab_main/* $R/ab_ds1/* > $OUT/ss/ab_stages.txt 2>&1
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
gzip -c $R/tests.log > $OUT/ss/tests.log.gz
tar czf $OUT/ss/runs.tgz -C $R ab_main ab_ds1 ; echo "done $(( $(date +%s)-t0 ))s"
