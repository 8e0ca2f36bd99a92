set -u
# (Rejected.) w4_wgmma.cu: narrow mainloop instances (N0 = 32 / 64 / 128 tokens, no second half) keep a
# ring of 16 / 13 / 8 stages sized to their activation rows instead of 5 stages of 256-row tiles.
# old = 10c922b (de9de0a: comments only), new = de9de0a + this change.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='*W4*:*w4*:*Mxfp4*:*Nvfp4*:*mxfp4*:*nvfp4*' > $R/tests.log 2>&1; echo "tests rc=$?"; grep -E "^\[  FAILED" $R/tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -3
timeout 90 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='W4WgmmaGpu.*:W4WgmmaActGpu.Bitwise*' > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -2
timeout 300 python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_old/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new --base old -- \
  --preset gpt-oss-120b,qwen3-30b-a3b-tp1,deepseek-v3-tp1 --m 256,512,1024,2048,4096 \
  --formats mxfp4,nvfp4 --check-tokens 1 --no-ceilings --stage-runs 1 --max-minutes 1 > $R/ab.log 2>&1
echo "ab rc=$?"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
