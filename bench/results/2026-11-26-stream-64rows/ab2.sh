set -u
# The kept rule (48 expected rows per active expert where k >= 512) against main's 32 (FMOE_AB_OLD_RANGE=1,
# AB-TEMP), same binary, interleaved; GPU suite + memcheck subset on the same binary first.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/ab2; mkdir -p $R; B=$PWD/.devcarry/bin; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 200 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
timeout 90 bash scripts/gpu_sanitize.sh $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[==========\].*ran|ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -4 | tee $R/memcheck_summary.txt
gzip -9 $R/gpu_tests.log $R/memcheck.log
A="--variant old:FMOE_AB_OLD_RANGE=1 --variant new: --order old,new,old,new,old,new --base old"
O="--formats bf16,fp8-tensor,fp8-channel,fp8-block --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 1"
timeout 150 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/ab1 $A -- --preset qwen3-30b-a3b-tp1,mixtral-8x7b --m 160,192,640,768 $O > $R/ab_a.md 2> $R/ab_a.err; echo "ab a rc=$? $(( $(date +%s)-t0 ))s"
cut -d'|' -f2,3,5,12- $R/ab_a.md | tail -36
timeout 150 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/ab2 $A -- --preset deepseek-v3-tp8,deepseek-v3-tp1 --m 1280,1536 $O > $R/ab_b.md 2> $R/ab_b.err; echo "ab b rc=$? $(( $(date +%s)-t0 ))s"
cut -d'|' -f2,3,5,12- $R/ab_b.md | tail -20
