set -u
R=$OUT/fuse1; mkdir -p $R; t0=$(date +%s)
B=.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt
GTEST_FILTER="*W4*:E2m1Device.*:*Activation*:*activation*" timeout 200 $B/fusedmoe_gpu_tests > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -3
if ! grep -q "FAILED  \]" $R/tests.log; then
python3 bench/ab.py run --bench $B/fusedmoe-bench-ab --out $R/ab --variant unfused:FMOE_W4_NOFUSE=1 --variant fused: --order unfused,fused,unfused,fused -- \
  --preset gpt-oss-120b-interleaved --m 64,256,1024,4096 \
  --formats mxfp4,nvfp4,mxfp4-fp8 --no-ceilings --check-tokens 4 --max-minutes 1 > $R/ab.md 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; tail -4 $R/ab.md
python3 bench/ab.py run --variant-bench old=.devcarry/bin_old/fusedmoe-bench --variant-bench new=$B/fusedmoe-bench-ab --out $R/ab2 --variant old: --variant new: --order old,new,old,new -- \
  --preset gpt-oss-120b,deepseek-v3-tp1,qwen3-30b-a3b-tp1 --m 1024,4096 \
  --formats mxfp4,nvfp4 --no-ceilings --check-tokens 2 --max-minutes 1 > $R/ab2.md 2>&1
echo "ab2 rc=$? $(( $(date +%s)-t0 ))s"; tail -4 $R/ab2.md
GTEST_FILTER="W4WgmmaGpu.*:Formats/W4Gpu.LargeBatch*" timeout 150 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/san.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED" $R/san.log | tail -3
fi
rm -rf $R/ab/*/routing $R/ab2/*/routing
