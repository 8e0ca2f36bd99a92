set -u
# The kept code (trimmed copies in the fused instance only), one binary with AB-TEMP switches:
# base = FMOE_AB_W4_NOACT=1,FMOE_AB_W4_NOY16=1 (fp32 h + activation kernel, fp32 y: the code before
# this work, plain kernels unchanged); y16 = FMOE_AB_W4_NOACT=1 (bf16 y only); new = both.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/r5; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
t0=$(date +%s)
timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='*W4*:*w4*:*W4a8*:*Mxfp4*:*Nvfp4*:*mxfp4*:*nvfp4*:*ActivationRow*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\[  FAILED" $R/tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4
timeout 400 python3 bench/ab.py run --bench $B/fusedmoe-bench --out $R/ab --variant base:FMOE_AB_W4_NOACT=1,FMOE_AB_W4_NOY16=1 \
  --variant y16:FMOE_AB_W4_NOACT=1 --variant new: --order base,y16,new,base,y16,new --base base -- \
  --preset gpt-oss-120b,qwen3-30b-a3b-tp1,deepseek-v3-tp1 --m 256,1024,2048,4096 \
  --formats mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4,w4a8-int4 --check-tokens 1 --no-ceilings --stage-runs 1 --max-minutes 1.4 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete
cd $OUT && tar czf r5.tgz r5 && rm -rf r5
