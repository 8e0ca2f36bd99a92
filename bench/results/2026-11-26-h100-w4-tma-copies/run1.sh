set -u
# w4_wgmma.cu: the stage copies by TMA (warp 0: 32-row activation boxes of the CTA's token widths,
# two 64-row weight boxes, one mbarrier per stage) instead of 9 cp.async per thread per stage.
# old = 3c7e704's binaries (bin_old), new = this change (bin). One device call: `bash run1.sh`.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha >> $R/device.txt
timeout 230 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -3
timeout 90 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='W4WgmmaGpu.*:W4WgmmaActGpu.*:StreamGemm.*:StreamGemmAct.*' > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"; grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3
gzip -9 $R/gpu_tests.log $R/memcheck.log
timeout 240 python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_old/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new --base old -- \
  --preset gpt-oss-120b,qwen3-30b-a3b-tp1,deepseek-v3-tp1 --m 256,1024,4096 \
  --formats mxfp4,nvfp4,nvfp4-w4a4 --check-tokens 1 --no-ceilings --stage-runs 1 --max-minutes 0.6 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
