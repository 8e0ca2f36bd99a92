set -u
# 4-bit large batches: GEMM1 + activation in the wgmma kernel's epilogue (MXFP4 / NVFP4) and
# GEMM2's y in bf16 (w4_wgmma, w4a8_wgmma) against fp32 h + the activation kernel and fp32 y.
# One binary, AB-TEMP switches: old = FMOE_AB_W4_NOACT=1,FMOE_AB_W4_NOY16=1.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/r3; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
t0=$(date +%s)
timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='*W4*:*w4*:*W4a8*:*Mxfp4*:*Nvfp4*:*mxfp4*:*nvfp4*:*ActivationRow*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\[  FAILED" $R/tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4
timeout 90 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='W4WgmmaActGpu.*:Formats/W4Gpu.LargeBatch*' > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"; grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3
timeout 330 python3 bench/ab.py run --bench $B/fusedmoe-bench --out $R/ab --variant old:FMOE_AB_W4_NOACT=1,FMOE_AB_W4_NOY16=1 \
  --variant new: --order old,new,old,new --base old -- \
  --preset gpt-oss-120b,qwen3-30b-a3b-tp1,deepseek-v3-tp1 --m 1024,4096 \
  --formats mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4,w4a8-int4 --check-tokens 1 --no-ceilings --stage-runs 1 --max-minutes 1.1 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete
# ptxas's choice for the x 4097 of the e2m1 decode (LEA x, x, 0xc on the ALU pipe vs IMAD): per kernel instance
cuobjdump -sass $B/fusedmoe-bench 2>/dev/null | awk '/Function :/{n=$NF} /w4_wgmma_kernel/{k=1} /LEA R[0-9]+, R[0-9]+, R[0-9]+, 0xc/{if(n~/w4_wgmma_kernel/)c[n]++} END{for(f in c) print c[f], f}' | tee $R/lea_0xc.txt
cd $OUT && tar czf r3.tgz r3 && rm -rf r3
