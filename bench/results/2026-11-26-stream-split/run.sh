set -u
# Split grids (kSplit: 64-row blocks, even / odd k steps on the two warpgroups) for stream-GEMM
# grids below half the SM count; decode-size GEMM1 counts them (DeepSeek-V3 TP8 at one token now
# streams). Targeted tests, then an interleaved A/B against 20a27f2 (prev).
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/k; mkdir -p $R; B=$PWD/.devcarry/bin; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 100 $B/fusedmoe_gpu_tests --gtest_filter='*StreamGemm*:*Layer*:*Edge*:*Fp8Block*:*SmallM*' > $R/targeted.log 2>&1; echo "targeted rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/targeted.log | head -20; grep -E "PASSED|FAILED  \]" $R/targeted.log | tail -3 | tee $R/targeted_summary.txt
timeout 150 python3 bench/ab.py run --variant-bench prev=$B/fusedmoe-bench-prev --variant-bench new=$B/fusedmoe-bench --out /tmp/abk --variant prev: --variant new: --order prev,new,prev,new --base prev -- --preset deepseek-v3-tp8,qwen3-30b-a3b-tp1,deepseek-v3-tp1,mixtral-8x7b --m 1,2,4 --formats bf16,fp8-tensor,fp8-block --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.md 2> $R/ab.err; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
cut -d'|' -f2,3,5,6- $R/ab.md | tail -40
gzip -9 $R/targeted.log
