set -u
# Three groups of warps (768 threads, 80 registers) + GEMM2 operand rows in one L2 round trip (g3)
# against 0eb7964's kernel (g2) and the chain (0eb7964 with FMOE_AB_NO_DECODE_LAYER=1).
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/g3; mkdir -p $R; B=$PWD/.devcarry/bin; BO=$PWD/.devcarry/bin_old; t0=$(date +%s)
cat $B/sha $BO/sha > $R/device.txt; nvidia-smi --query-gpu=name,driver_version --format=csv >> $R/device.txt
timeout 60 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*' > $R/decode_tests.log 2>&1; echo "decode tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" -A2 $R/decode_tests.log | head -20; grep -E "PASSED|FAILED  \]" $R/decode_tests.log | tail -2
GTEST_FILTER='*DecodeLayer*' timeout 60 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$?"
grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -2
A="--variant chain:FMOE_AB_NO_DECODE_LAYER=1 --variant-bench chain=$BO/fusedmoe-bench --variant g2: --variant-bench g2=$BO/fusedmoe-bench --variant g3: --variant-bench g3=$B/fusedmoe-bench --order chain,g2,g3,chain,g2,g3,chain,g2,g3 --base chain"
O="--formats fp8-tensor --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1"
timeout 150 python3 bench/ab.py run --out /tmp/ab3 $A -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1 $O > $R/ab.md 2> $R/ab.err; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
cat $R/ab.md | tail -7; tail -3 $R/ab.err
gzip -9 $R/memcheck.log
