set -u
# As run.sh, three variants: base = the kernel copying every activation chunk (bin_old) with the
# fusion and bf16 y off (= before this work); trim = only the chunks an instance needs, fusion and
# bf16 y off; new = trim + GEMM1 activation epilogue + bf16 y.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/r4; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
t0=$(date +%s)
timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='*W4*:*w4*:*W4a8*:*Mxfp4*:*Nvfp4*:*mxfp4*:*nvfp4*:*ActivationRow*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\[  FAILED" $R/tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4
timeout 90 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='W4WgmmaActGpu.*:W4WgmmaGpu.*:Formats/W4Gpu.LargeBatch*' > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"; grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3
timeout 400 python3 bench/ab.py run --out $R/ab --variant base:FMOE_AB_W4_NOACT=1,FMOE_AB_W4_NOY16=1 --variant-bench base=$PWD/.devcarry/bin_old/fusedmoe-bench \
  --variant trim:FMOE_AB_W4_NOACT=1,FMOE_AB_W4_NOY16=1 --variant-bench trim=$B/fusedmoe-bench --variant new: --variant-bench new=$B/fusedmoe-bench \
  --order base,trim,new,base,trim,new --base base -- \
  --preset gpt-oss-120b,qwen3-30b-a3b-tp1,deepseek-v3-tp1 --m 1024,4096 \
  --formats mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4,w4a8-int4 --check-tokens 1 --no-ceilings --stage-runs 1 --max-minutes 1.1 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete
cd $OUT && tar czf r4.tgz r4 && rm -rf r4
