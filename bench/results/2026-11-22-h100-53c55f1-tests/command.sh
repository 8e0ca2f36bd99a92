set -u
K=$(cd .devcarry/kit && pwd); S=$(cat .devcarry/sha); t0=$(date +%s)
R=$OUT/call1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > $R/device.txt; echo "new = $S (unmodified), old = 2392b25 (unmodified)" >> $R/device.txt; date -u >> $R/device.txt
(cd .devcarry/snapold && FUSEDMOE_KIT=$K OUT=$R/check_old bash scripts/gpu_check.sh build > /dev/null 2>&1; echo "old build rc=$?") &
cd .devcarry/snap
FUSEDMOE_KIT=$K OUT=$R/check bash scripts/gpu_check.sh build tests; echo "build+tests rc=$? $(( $(date +%s)-t0 ))s"
rm -f $R/check/build.log
grep -E "FAILED|Failure" $R/check/gpu_tests.log | head -20
grep -E "PASSED|FAILED|SKIPPED \]" $R/check/gpu_tests.log | tail -4 > $R/gpu_tests_summary.txt; cat $R/gpu_tests_summary.txt
wait; echo "old built $(( $(date +%s)-t0 ))s"; rm -f $R/check_old/build.log
timeout 240 bash scripts/gpu_sanitize.sh build-gpu/tests/fusedmoe_gpu_tests > $R/san.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|LEAK SUMMARY|PASSED|FAILED|tests from" $R/san.log > $R/sanitize_summary.txt; tail -c 3000 $R/san.log > $R/san_tail.log; rm -f $R/san.log; cat $R/sanitize_summary.txt
python3 bench/ab.py run --variant-bench old=$PWD/../snapold/build-gpu/tools/bench/fusedmoe-bench --bench build-gpu/tools/bench/fusedmoe-bench --out $R/ab \
  --variant old: --variant new: --order old,new,old,new -- \
  --preset mixtral-8x7b --m 1,2,1024,4096 --formats fp8-channel,w4a8-int4 --no-ceilings --check-tokens 2 --max-minutes 0.4 > $R/ab.md
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; cat $R/ab.md
python3 bench/ab.py run --variant-bench old=$PWD/../snapold/build-gpu/tools/bench/fusedmoe-bench --bench build-gpu/tools/bench/fusedmoe-bench --out $R/abdyn \
  --variant old: --variant new: --order old,new,old,new -- \
  --preset qwen3-30b-a3b-tp1 --m 1,1024,4096 --formats fp8-tensor --fp8-act-scale dynamic --no-ceilings --check-tokens 2 --max-minutes 0.3 > $R/abdyn.md
echo "abdyn rc=$? $(( $(date +%s)-t0 ))s"; cat $R/abdyn.md
rm -rf $R/ab/*/routing $R/abdyn/*/routing
cd $OUT && tar czf call1.tgz call1 && rm -rf call1
