set -u
# The 4-bit wgmma kernel's activations in its k order (w4_kperm.cuh): written so by the gather /
# activation kernels and GEMM1's fused epilogue, decoded without byte selects. old = 3c7e704's
# binaries (bin_old), new = this change (bin). One device call: `bash run1.sh`.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha >> $R/device.txt
timeout 200 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "^\[==========\]|PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4
timeout 100 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='W4Kperm*:W4WgmmaGpu.*:W4WgmmaActGpu.Bitwise*:W4WgmmaActGpu.Nvfp4*' > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"; grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3
gzip -9 $R/gpu_tests.log $R/memcheck.log
timeout 250 python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_old/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new --base old -- \
  --preset gpt-oss-120b,qwen3-30b-a3b-tp1,deepseek-v3-tp1 --m 256,1024,4096 \
  --formats mxfp4,nvfp4,mxfp4-fp8,nvfp4-w4a4 --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.5 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
