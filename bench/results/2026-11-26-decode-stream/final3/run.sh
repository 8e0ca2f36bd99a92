set -u
# After final2/: decode-size GEMM1 streams only where no fusion is lost (Mixtral bf16 one token went 1.095x
# halves more than 32 MB apart unfused (Mixtral). Stream / layer tests, then the A/B against
# b9e64e5's behaviour (prev binary with FMOE_AB_NO_STREAM_ACT=1).
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/f3; mkdir -p $R; B=$PWD/.devcarry/bin; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='*StreamGemm*:*Layer*:*Edge*:*Fp8Block*:*SmallM*' > $R/targeted.log 2>&1; echo "targeted rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/targeted.log | head -20; grep -E "PASSED|FAILED  \]" $R/targeted.log | tail -3 | tee $R/targeted_summary.txt
timeout 240 python3 bench/ab.py run --variant-bench old=$B/fusedmoe-bench-prev --variant-bench new=$B/fusedmoe-bench --out /tmp/abf3 --variant old:FMOE_AB_NO_STREAM_ACT=1 --variant new: --order old,new,old,new --base old -- --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 --m 1,2 --formats bf16,fp8-tensor,fp8-channel,fp8-block --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.md 2> $R/ab.err; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
cut -d'|' -f2,3,5,10- $R/ab.md | tail -36
gzip -9 $R/targeted.log
