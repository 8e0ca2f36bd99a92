set -u
K=$(cd .devcarry/kit && pwd); S=$(cat .devcarry/sha); t0=$(date +%s)
R=$OUT/call5; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > $R/device.txt; echo "sha $S + env switches of mksnap.sh (FMOE_MB_MINK etc., snapshot only)" >> $R/device.txt; date -u >> $R/device.txt
cd .devcarry/snap
FUSEDMOE_KIT=$K OUT=$R/check bash scripts/gpu_check.sh build tests > $R/check_out.txt 2>&1; echo "build+tests rc=$? $(( $(date +%s)-t0 ))s"
rm -f $R/check/build.log
grep -E "FAILED|Failure" $R/check/gpu_tests.log | head -20
grep -E "PASSED|FAILED|SKIPPED \]" $R/check/gpu_tests.log | tail -4 > $R/gpu_tests_summary.txt; cat $R/gpu_tests_summary.txt
grep -A3 "MediumConfig" $R/check/gpu_tests.log | head -5
GTEST_FILTER="Fp8BlockGpuShapes.*" timeout 120 bash scripts/gpu_sanitize.sh build-gpu/tests/fusedmoe_gpu_tests > $R/san.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|LEAK SUMMARY|PASSED|FAILED" $R/san.log > $R/sanitize_summary.txt; rm -f $R/san.log; cat $R/sanitize_summary.txt
python3 bench/ab.py run --bench build-gpu/tools/bench/fusedmoe-bench --out $R/ab \
  --variant off:FMOE_MB_MINK=1000000000 --variant k4096: --variant all:FMOE_MB_MINK=0 --order off,k4096,all,off,k4096,all -- \
  --preset deepseek-v3-tp1,deepseek-v3-tp8,qwen3-30b-a3b-tp1,mixtral-8x7b --m 256,1024,2048,4096 --formats fp8-block --no-ceilings --check-tokens 2 --max-minutes 2 > $R/ab.md
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; cat $R/ab.md
rm -rf $R/ab/*/routing
cd $OUT && tar czf call5.tgz call5 && rm -rf call5
