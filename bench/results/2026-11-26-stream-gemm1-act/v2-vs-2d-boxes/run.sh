set -u
# Diagnostic: the fused kernel's weight stage as one 5-D TMA box (new) or as 16 2-D boxes of 8
# rows (FMOE_AB_ACT_2D=1, halves only), against the unfused pair (base).
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/r3; mkdir -p $R; B=$PWD/.devcarry/bin; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
FMOE_AB_ACT_2D=1 timeout 120 $B/fusedmoe_gpu_tests --gtest_filter='*StreamGemmAct*:*Gemm1Act*' > $R/targeted.log 2>&1; echo "targeted(2d) rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/targeted.log | head -20; grep -E "PASSED|FAILED  \]" $R/targeted.log | tail -3
timeout 300 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/ab3 --variant base:FMOE_AB_NO_STREAM_ACT=1 --variant new: --variant twod:FMOE_AB_ACT_2D=1 --order base,new,twod,base,new,twod,base,new,twod --base base -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,deepseek-v3-tp1 --m 8,64,256 --formats bf16,fp8-tensor --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.md 2> $R/ab.err; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
tail -22 $R/ab.md
gzip -9 $R/targeted.log
