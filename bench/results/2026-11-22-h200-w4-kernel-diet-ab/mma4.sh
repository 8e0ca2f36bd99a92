set -u
R=$OUT/mma4; mkdir -p $R; t0=$(date +%s)
B=.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt
GTEST_FILTER="*W4*" timeout 150 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/gpu_tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -5
python3 bench/ab.py run --variant-bench old=.devcarry/bin_old/fusedmoe-bench --variant-bench new=$B/fusedmoe-bench --out $R/ab \
  --variant old: --variant new: --order old,new,old,new -- \
  --preset gpt-oss-120b,deepseek-v3-tp1,qwen3-30b-a3b-tp1 --m 1,8,64,256 \
  --formats mxfp4,nvfp4,nvfp4-w4a4,w4a8-int4 --no-ceilings --check-tokens 2 --max-minutes 1 > $R/ab.md 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; tail -4 $R/ab.md
GTEST_FILTER="Formats/W4Gpu.Decode*:Formats/W4Gpu.Ragged*:W4GpuEdge.*" timeout 150 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/san.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED" $R/san.log | tail -3
rm -rf $R/ab/*/routing
