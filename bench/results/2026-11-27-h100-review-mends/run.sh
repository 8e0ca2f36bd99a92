set -u
# The review mends (one helper for the "=0" diagnostic switches; the one-token prefetch gated to fp8-channel inside
# the kernel, fp8-block back on quantise_block_lanes; set_sibling_sync from sibling_counters_per_group): the GPU
# suite, then the one-token A/B of the prefetch switch. From the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/mends; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 240 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt; gzip -9 $R/gpu_tests.log
timeout 200 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/mends_ab --variant off:FUSEDMOE_DL_PREFETCH=0 --variant on: \
  --order off,on,off,on,off,on --base off -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1 --formats fp8-tensor,fp8-channel,fp8-block \
  --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 0.4 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log | tee $R/ab.md; gzip -9 $R/ab.log
