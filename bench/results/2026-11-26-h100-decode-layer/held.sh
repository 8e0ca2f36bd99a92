set -u
# Staged rows kept in registers between amax and codes (fp8-channel: one warp per slot; dynamic
# fp8-tensor: the whole CTA) against f3a3ecf (two L2 passes), interleaved; decode-layer tests first.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/h; mkdir -p $R; B=$PWD/.devcarry/bin; BO=$PWD/.devcarry/bin_old
cat $B/sha $BO/sha > $R/device.txt
timeout 90 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*' > $R/tests.log 2>&1; echo "tests rc=$?"; grep -E "^\[  FAILED|Failure" -A3 $R/tests.log | head -20; grep -E "PASSED|FAILED  \]" $R/tests.log | tail -2
GTEST_FILTER='*DecodeLayer*' timeout 60 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" $R/memcheck.log
A="--variant old: --variant-bench old=$BO/fusedmoe-bench --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new,old,new --base old"
O="--check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1"
timeout 100 python3 bench/ab.py run --out /tmp/ah1 $A -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1 --formats fp8-channel,fp8-tensor $O > $R/ab.md 2> $R/ab.err; echo "ab rc=$?"; tail -6 $R/ab.md
timeout 100 python3 bench/ab.py run --out /tmp/ah2 $A -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1 --formats fp8-tensor --fp8-act-scale dynamic $O > $R/ab_dynamic.md 2> $R/ab_dynamic.err; echo "ab dyn rc=$?"; tail -5 $R/ab_dynamic.md
gzip -9 $R/tests.log $R/memcheck.log
