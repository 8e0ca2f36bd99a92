set -u
# The one-token layer kernel (decode_layer.cu) against the chain it replaces
# (FMOE_AB_NO_DECODE_LAYER=1, AB-TEMP), same binary: its tests, the GPU suite, memcheck, then an
# interleaved A/B at one token on the presets it takes.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/d; mkdir -p $R; B=$PWD/.devcarry/bin; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 60 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*' > $R/decode_tests.log 2>&1; echo "decode tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|rel-err|Failure|error" $R/decode_tests.log | head -30; grep -E "PASSED|FAILED  \]" $R/decode_tests.log | tail -3
GTEST_FILTER='*DecodeLayer*' timeout 60 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[==========\].*ran|ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3 | tee $R/memcheck_summary.txt
A="--variant old:FMOE_AB_NO_DECODE_LAYER=1 --variant new: --order old,new,old,new --base old"
O="--formats bf16,fp8-tensor --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1"
timeout 150 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/ab1 $A -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1 $O > $R/ab.md 2> $R/ab.err; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
cut -d'|' -f2,3,5,10- $R/ab.md | tail -8; tail -3 $R/ab.err
timeout 200 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
gzip -9 $R/gpu_tests.log $R/memcheck.log
