set -u
# GEMM2's operand rows for a unit in one L2 round trip (new binary) against three per unit (old
# binary: 3b77db0's kernel, the contig switch off), interleaved.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/p; mkdir -p $R; B=$PWD/.devcarry/bin; BO=$PWD/.devcarry/bin_old
timeout 60 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*' > $R/decode_tests.log 2>&1; echo "decode tests rc=$?"; grep -E "PASSED|FAILED" $R/decode_tests.log | tail -2
GTEST_FILTER='*DecodeLayer*' timeout 60 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" $R/memcheck.log
A="--variant old: --variant-bench old=$BO/fusedmoe-bench --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new,old,new --base old"
O="--formats fp8-tensor --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1"
timeout 150 python3 bench/ab.py run --out /tmp/ab5 $A -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1 $O > $R/ab.md 2> $R/ab.err; echo "ab rc=$?"
cat $R/ab.md | tail -6; gzip -9 $R/memcheck.log
