set -u
K=$(cd .devcarry/kit && pwd); S=$(cat .devcarry/sha); t0=$(date +%s)
R=$OUT/call2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > $R/device.txt; echo "sha $S + env switches FMOE_W4_FP16 / FMOE_W4_MINROWS (snapshot only)" >> $R/device.txt; date -u >> $R/device.txt
cd .devcarry/snap
FUSEDMOE_KIT=$K OUT=$R/check bash scripts/gpu_check.sh build tests; echo "build+tests rc=$? $(( $(date +%s)-t0 ))s"
rm -f $R/check/build.log
grep -E "FAILED|Failure" $R/check/gpu_tests.log | head -20
grep -E "rel-err.*w4a8|W4GpuEdge" $R/check/gpu_tests.log | head -40 > $R/w4_lines.txt
grep -E "PASSED|FAILED|SKIPPED \]" $R/check/gpu_tests.log | tail -4 > $R/gpu_tests_summary.txt; cat $R/gpu_tests_summary.txt
GTEST_FILTER="Formats/W4Gpu.LargeBatchMatchesOracle/*:Formats/W4Gpu.RaggedSizesMatchOracle/w4a8*:W4GpuEdge.*:Fp8BlockGpuShapes.*" timeout 200 bash scripts/gpu_sanitize.sh build-gpu/tests/fusedmoe_gpu_tests > $R/san.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|LEAK SUMMARY|PASSED|FAILED|tests from" $R/san.log > $R/sanitize_summary.txt; tail -c 2000 $R/san.log > $R/san_tail.log; rm -f $R/san.log; cat $R/sanitize_summary.txt
python3 bench/ab.py run --bench build-gpu/tools/bench/fusedmoe-bench --out $R/ab \
  --variant fp16dec:FMOE_W4_FP16=1 --variant fp8dec: --variant fp8dec24:FMOE_W4_MINROWS=24 --order fp16dec,fp8dec,fp8dec24,fp16dec,fp8dec,fp8dec24 -- \
  --preset deepseek-v3-tp1,qwen3-30b-a3b-tp1,mixtral-8x7b --m 512,1024,4096 --formats w4a8-int4 --no-ceilings --check-tokens 2 --max-minutes 2 > $R/ab.md
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; cat $R/ab.md
rm -rf $R/ab/*/routing
cd $OUT && tar czf call2.tgz call2 && rm -rf call2
