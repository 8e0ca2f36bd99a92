set -u
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/v4; mkdir -p $R; t0=$(date +%s)
B=.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt
GTEST_FILTER="W4a8WgmmaGpu.*" timeout 60 $B/fusedmoe_gpu_tests > $R/a8_tests.log 2>&1; echo "a8 tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure|got" $R/a8_tests.log | head -10; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/a8_tests.log | tail -3
if ! grep -q "FAILED  \]" $R/a8_tests.log && grep -q PASSED $R/a8_tests.log; then
GTEST_FILTER="*W4*:*Int4*" timeout 200 $B/fusedmoe_gpu_tests > $R/w4_tests.log 2>&1; echo "w4 tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/w4_tests.log | head -10; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/w4_tests.log | tail -3
python3 bench/ab.py run --variant-bench v1=.devcarry/bin_old/fusedmoe-bench --variant-bench v4=$B/fusedmoe-bench --out $R/ab --variant v1: --variant v4: --order v1,v4,v1,v4 -- \
  --preset deepseek-v3-tp1,qwen3-30b-a3b-tp1 --m 512,1024,4096 \
  --formats w4a8-int4 --no-ceilings --check-tokens 2 --max-minutes 0.6 > $R/ab.md 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; tail -10 $R/ab.md
MET="--section SpeedOfLight --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__warps_eligible.avg.per_cycle_active"
timeout 100 ncu --kernel-name regex:w4a8_wgmma --launch-skip 2 --launch-count 2 $MET $B/fusedmoe-bench --preset deepseek-v3-tp1 --m 4096 --formats w4a8-int4 --no-ceilings --no-check --max-minutes 0.05 --out-dir $R/c > $R/ncu_a8.txt 2>&1; echo "ncu rc=$?"
grep -E "w4a8_|issue_active|inst_executed|Duration|Compute \(SM\)|Memory Through|eligible" $R/ncu_a8.txt; grep stalled $R/ncu_a8.txt | awk '$NF+0 > 0.1' | sed 's/smsp__average_warps_issue_stalled_//'
GTEST_FILTER="W4a8WgmmaGpu.*:Formats/W4Gpu.LargeBatch*w4a8*:W4GpuEdge.W4a8*" timeout 150 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/san.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED" $R/san.log | tail -3
GTEST_FILTER="W4a8WgmmaGpu.*" timeout 150 compute-sanitizer --tool racecheck $B/fusedmoe_gpu_tests > $R/race.log 2>&1; echo "racecheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $R/race.log | tail -3
fi
rm -rf $R/ab/*/routing $R/c
cd $OUT && tar czf v4.tgz v4 && rm -rf v4
