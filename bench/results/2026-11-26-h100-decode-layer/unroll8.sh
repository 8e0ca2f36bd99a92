set -u
# GEMM1 with 8 k-blocks per lane in flight (x read from shared memory per k-block; DeepSeek-V3 TP8:
# 2 load rounds per task instead of 4) against 4 (d8b0ad6), interleaved; decode-layer tests first.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/u; mkdir -p $R; B=$PWD/.devcarry/bin; BO=$PWD/.devcarry/bin_old
cat $B/sha $BO/sha > $R/device.txt
timeout 90 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*' > $R/tests.log 2>&1; echo "tests rc=$?"; grep -E "^\[  FAILED|Failure" -A3 $R/tests.log | head -20; grep -E "PASSED|FAILED  \]" $R/tests.log | tail -2
A="--variant old: --variant-bench old=$BO/fusedmoe-bench --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new,old,new --base old"
O="--check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1"
timeout 120 python3 bench/ab.py run --out /tmp/au $A -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1 --formats fp8-tensor,fp8-block,fp8-channel $O > $R/ab.md 2> $R/ab.err; echo "ab rc=$?"; tail -9 $R/ab.md
gzip -9 $R/tests.log
