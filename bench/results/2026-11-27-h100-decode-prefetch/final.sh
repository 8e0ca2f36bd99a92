set -u
# The kept form (fp8-channel only) at the commit in .devcarry/sha8: the decode-layer / edge / layer tests, memcheck of
# the decode-layer tests, and the one-token fp8 points against the oracle, with FUSEDMOE_DL_PREFETCH=0 / default.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/dlpf; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='Shapes/DecodeLayerGpu.*:DecodeLayerGpuEdge.*:*Edge*:AllFormatsActivations/LayerGpu.*' > $R/tests.log 2>&1
echo "tests rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED" $R/tests.log | tail -6 | tee $R/tests_summary.txt
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 86 $B/fusedmoe_gpu_tests --gtest_filter='Shapes/DecodeLayerGpu.*:DecodeLayerGpuEdge.*' > $R/memcheck.log 2>&1
echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"; grep -E "ERROR SUMMARY|PASSED" $R/memcheck.log | tail -2 | tee $R/memcheck_summary.txt
timeout 200 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/dlpf_ab --variant off:FUSEDMOE_DL_PREFETCH=0 --variant on: \
  --order off,on,off,on,off,on --base off -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1 --formats fp8-tensor,fp8-channel,fp8-block \
  --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 0.4 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log | tee $R/ab.md; gzip -9 $R/tests.log $R/memcheck.log $R/ab.log
