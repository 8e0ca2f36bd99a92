set -u
# v2 (wgmma consumers, producer-staged block scales), every swap-AB call routed to it (AB-TEMP):
# direct tests, GPU suite, memcheck on the direct tests, same-call A/B against the base binary.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/res; mkdir -p $R; t0=$(date +%s)
B=$PWD/.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha $B/base_sha >> $R/device.txt; date -u >> $R/device.txt
GTEST_FILTER="*StreamGemm*" timeout 120 $B/fusedmoe_gpu_tests > $R/stream_tests.log 2>&1; echo "stream tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|PASSED|FAILED  \]" $R/stream_tests.log | head -30
GTEST_FILTER="-StreamGemmRules.*" timeout 300 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
GTEST_FILTER="*StreamGemm.*:*StreamGemmBlock.*" timeout 200 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3 | tee $R/memcheck_summary.txt
timeout 200 python3 bench/ab.py run --variant-bench base=$B/fusedmoe-bench-base --variant-bench new=$B/fusedmoe-bench --out /tmp/ab --variant base: --variant new: --order base,new,base,new --base base -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,mixtral-8x7b,deepseek-v3-tp1 --m 8,64,256,512 --formats bf16,fp8-tensor,fp8-block --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 2 > $R/ab.md 2> $R/ab.err; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
tail -5 $R/ab.err
for d in /tmp/ab/*/; do cp $d/fusedmoe-bench.json $R/$(basename $d).json 2>/dev/null; done
gzip -9 $R/gpu_tests.log $R/memcheck.log
cd $OUT && tar czf res.tgz res && rm -rf res
