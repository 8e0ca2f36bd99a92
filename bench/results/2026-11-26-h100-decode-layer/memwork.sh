set -u
# Decode-layer tests at this commit, then ncu's memory workload of the one-token kernel (Qwen3 fp8
# static, DeepSeek-V3 TP8 fp8 static): where GEMM1's ~2.2 TB/s goes (for the next session).
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/m; mkdir -p $R; B=$PWD/.devcarry/bin
cat $B/sha > $R/device.txt; nvidia-smi --query-gpu=name,driver_version --format=csv >> $R/device.txt
timeout 60 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*' > $R/decode_tests.log 2>&1; echo "tests rc=$?"; grep -E "PASSED|FAILED" $R/decode_tests.log | tail -2
for P in qwen3-30b-a3b-tp1 deepseek-v3-tp8; do
  timeout 90 ncu --kernel-name regex:decode_layer --launch-skip 5 --launch-count 1 --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section SpeedOfLight --section SchedulerStats --section WarpStateStats \
    $B/fusedmoe-bench --preset $P --m 1 --formats fp8-tensor --no-ceilings --stage-runs 0 --check-tokens 1 --max-reps 10 --graph-max-m 0 --out-dir /tmp/b > $R/ncu_$P.txt 2>&1
  echo "$P rc=$?"; grep -E "Duration|DRAM Throughput|L2 Hit|Mem Busy|Max Bandwidth|Issued Warp|No Eligible|Stall" $R/ncu_$P.txt | head -12
done
