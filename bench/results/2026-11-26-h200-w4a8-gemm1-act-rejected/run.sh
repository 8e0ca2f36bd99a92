set -u
# (Rejected.) W4A8 GEMM1 + activation (w4a8_wgmma.cu kAct: bf16 rows + the per-token fp8 quantise pass)
# against GEMM1 to fp32 h + the activation kernel. old = 96c4b93's binary (no 4-bit change
# between it and c7fbee5 touches W4A8), new = c7fbee5 + this change. mxfp4 / nvfp4: controls
# (w4_wgmma.cu's epilogue moved into w4_act_epilogue.cuh, same mainloop SASS).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
t0=$(date +%s)
timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='*W4*:*w4*:*W4a8*:*w4a8*:*ActivationRow*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\[  FAILED" $R/tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4
timeout 120 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='W4WgmmaActGpu.*:W4a8WgmmaGpu.*' > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"; grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3
timeout 300 python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_old/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new --base old -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp1 --m 256,1024,2048,4096 \
  --formats w4a8-int4,mxfp4 --check-tokens 1 --no-ceilings --stage-runs 1 --max-minutes 1 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
