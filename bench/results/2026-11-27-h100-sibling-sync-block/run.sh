set -u
# The sibling sync as its own mainloop wrapper (sm90_sibling_sync_mainloop.cuh) on every large-M GEMM1 instance:
# the bf16 / fp8-tensor / fp8-channel GEMM1 + activation (as measured in ../2026-11-27-h100-sibling-sync) and now
# the fp8-block ones (blockwise GEMM1 + activation; the plain blockwise GEMM, which runs Mixtral's unfused GEMM1 and
# every fp8-block GEMM2). Same binary, FUSEDMOE_SIBLING_SYNC=0 = off. The GPU suite first (sync on), then ncu DRAM
# bytes of the fp8-block GEMMs both ways, then the layer A/B interleaved three times each.
# `bash bench/results/2026-11-27-h100-sibling-sync-block/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/ssb; mkdir -p $R $OUT/ssb
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/ssb/device.txt; cat $B/sha >> $OUT/ssb/device.txt; date -u >> $OUT/ssb/device.txt
timeout 300 $B/fusedmoe_gpu_tests > $R/tests.log 2>&1
echo "suite rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|FAILED" $R/tests.log | tail -15 | tee $OUT/ssb/tests_summary.txt
M="gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct"
nc() {  # preset format m sync
  FUSEDMOE_SIBLING_SYNC=$4 timeout 100 ncu --kernel-name device_kernel --launch-count 2 --metrics $M \
    $B/fusedmoe-bench --preset $1 --m $3 --formats $2 --routing uniform --no-ceilings --no-check \
    --stage-runs 0 --warmup 0 --min-reps 1 --max-reps 1 --rotate 1 --out-dir /tmp/ncu_x > /tmp/ncu_one.txt 2>&1
  echo "== GEMM1, GEMM2 $1 $2 M=$3 sync=$4 rc=$?"; grep -E "gpu__time|dram__bytes|hit_rate" /tmp/ncu_one.txt | sed 's/^ *//'
}
{ for s in 0 1; do nc mixtral-8x7b fp8-block 1024 $s; nc deepseek-v3-tp1 fp8-block 4096 $s; nc qwen3-30b-a3b-tp1 fp8-block 4096 $s; done; } > $OUT/ssb/ncu.txt 2>&1
echo "ncu $(( $(date +%s)-t0 ))s"; cat $OUT/ssb/ncu.txt
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
ab() {  # name presets m formats
  timeout ${ABT:-200} $AB --out $R/ab_$1 --variant off:FUSEDMOE_SIBLING_SYNC=0 --variant on: --order off,on,off,on,off,on --base off -- \
    --preset $2 --m $3 --formats $4 --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes ${ABM:-0.5} > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $OUT/ssb/ab_$1.md
}
ab block mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp8 256,1024,4096 fp8-block
ABT=200 ab ds1 deepseek-v3-tp1 1024,4096 fp8-block,fp8-tensor,bf16
ABT=150 ab mix mixtral-8x7b 1024 bf16,fp8-tensor
python3 bench/ab.py stages $R/ab_block/* $R/ab_ds1/* $R/ab_mix/* > $OUT/ssb/ab_stages.txt 2>&1
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
gzip -c $R/tests.log > $OUT/ssb/tests.log.gz
tar czf $OUT/ssb/runs.tgz -C $R ab_block ab_ds1 ab_mix ; echo "done $(( $(date +%s)-t0 ))s"
