set -u
# memcheck of the k-order writer tests and the token-major nvfp4 gathers (run1's filter matched no test).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/r2; mkdir -p $R; nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt
timeout 150 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='*W4KorderWriters*:*GatherTokenPaths*nvfp4*' > $R/memcheck.log 2>&1; echo "memcheck rc=$?"
grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3; gzip -9 $R/memcheck.log
cd $OUT && tar czf r2.tgz r2 && rm -rf r2
