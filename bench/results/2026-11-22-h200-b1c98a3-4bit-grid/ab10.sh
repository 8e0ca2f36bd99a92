set -u
R=$OUT/ab10; mkdir -p $R; t0=$(date +%s)
python3 bench/ab.py run --variant-bench old=.devcarry/bin_old/fusedmoe-bench --variant-bench new=.devcarry/bin/fusedmoe-bench --out $R/ab \
  --variant old: --variant new: --order old,new,old,new -- \
  --preset gpt-oss-120b,deepseek-v3-tp1,qwen3-30b-a3b-tp1 --m 1,8,64,256,1024,4096 \
  --formats mxfp4,nvfp4,nvfp4-w4a4,mxfp4-fp8 --no-ceilings --check-tokens 2 --max-minutes 1.2 > $R/ab.md 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; tail -4 $R/ab.md
GTEST_FILTER="W4WgmmaGpu.*:Formats/W4Gpu.*:W4GpuEdge.*" timeout 200 compute-sanitizer --tool memcheck .devcarry/bin/fusedmoe_gpu_tests > $R/san.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED" $R/san.log | tail -3
rm -rf $R/ab/*/routing
