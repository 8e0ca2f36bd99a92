set -u
# dynamic fp8-tensor in the one-token kernel: its tests, memcheck, then A/B against the chain (old binary
# fffc203: its dynamic fp8-tensor layers take the chain; static fp8-tensor the same kernel: control).
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/dy; mkdir -p $R; B=$PWD/.devcarry/bin; BO=$PWD/.devcarry/bin_old
cat $B/sha $BO/sha > $R/device.txt
timeout 90 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*:*fp8_tensor_dynamic*:*Edge*' > $R/tests.log 2>&1; echo "tests rc=$?"
grep -E "^\[  FAILED|Failure" -A3 $R/tests.log | head -30; grep -E "rel-err.*dynamic" $R/tests.log | head -12; grep -E "PASSED|FAILED  \]" $R/tests.log | tail -2
GTEST_FILTER='*DecodeLayer*' timeout 60 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -2
A="--variant old: --variant-bench old=$BO/fusedmoe-bench --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new,old,new --base old"
O="--formats fp8-tensor --fp8-act-scale dynamic --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1"
timeout 150 python3 bench/ab.py run --out /tmp/ab8 $A -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1 $O > $R/ab.md 2> $R/ab.err; echo "ab rc=$?"
cat $R/ab.md | tail -6; gzip -9 $R/tests.log $R/memcheck.log
O2="--formats fp8-tensor --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1"
timeout 100 python3 bench/ab.py run --out /tmp/ab9 $A -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1 $O2 > $R/ab_static.md 2> $R/ab_static.err; echo "ab static rc=$?"; tail -5 $R/ab_static.md
