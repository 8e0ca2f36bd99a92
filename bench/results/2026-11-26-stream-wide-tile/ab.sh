set -u
# The stream GEMM's 128-row token tile (N = 128 wgmma, 6 x 32 KB stages at one CTA per SM) and the
# range to 64 expected rows per expert where k >= 512, against c3684f5's behaviour (range 48, 64-row
# tile only), same binary (AB-TEMP: FMOE_AB_RANGE, FMOE_AB_WIDE); GPU suite + memcheck first.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/w; mkdir -p $R; B=$PWD/.devcarry/bin; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 200 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
timeout 90 bash scripts/gpu_sanitize.sh $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[==========\].*ran|ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3 | tee $R/memcheck_summary.txt
gzip -9 $R/gpu_tests.log $R/memcheck.log
A="--variant base:FMOE_AB_RANGE=48,FMOE_AB_WIDE=0 --variant w32:FMOE_AB_RANGE=64 --variant w48:FMOE_AB_RANGE=64,FMOE_AB_WIDE=48 --order base,w32,w48,base,w32,w48 --base base"
O="--formats bf16,fp8-tensor,fp8-block --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 0.8"
timeout 170 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/ab1 $A -- --preset qwen3-30b-a3b-tp1,mixtral-8x7b --m 192,256,768,1024 $O > $R/ab_a.md 2> $R/ab_a.err; echo "ab a rc=$? $(( $(date +%s)-t0 ))s"
cut -d'|' -f2,3,5,12- $R/ab_a.md | tail -26
timeout 170 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/ab2 $A -- --preset deepseek-v3-tp8,deepseek-v3-tp1 --m 1536,2048 $O > $R/ab_b.md 2> $R/ab_b.err; echo "ab b rc=$? $(( $(date +%s)-t0 ))s"
cut -d'|' -f2,3,5,12- $R/ab_b.md | tail -14
