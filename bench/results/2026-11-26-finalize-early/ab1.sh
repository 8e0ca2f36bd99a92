set -u
# GEMM2 + finalize (small-M) issuing its first pass of weight loads before chain_wait(), against
# after it (FMOE_AB_NO_EARLY_FIN=1, AB-TEMP), same binary, interleaved; targeted tests + memcheck.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/ab1; mkdir -p $R; B=$PWD/.devcarry/bin; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 120 $B/fusedmoe_gpu_tests --gtest_filter='*SmallM*:*Layer*:*Edge*:*Fp8Block*:*Plan*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/tests.log | head; grep -E "PASSED|FAILED  \]" $R/tests.log | tail -3 | tee $R/tests_summary.txt
GTEST_FILTER='Cases/SmallMFinalize.*:EdgeGpu.*:AllFormatsActivations/LayerGpu.MatchesOracle/*_silu_vllm' timeout 90 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[==========\].*ran|ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3 | tee $R/memcheck_summary.txt
gzip -9 $R/tests.log $R/memcheck.log
timeout 250 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/ab1 --variant old:FMOE_AB_NO_EARLY_FIN=1 --variant new: --order old,new,old,new --base old -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,deepseek-v3-tp1,mixtral-8x7b --m 1,2 --formats bf16,fp8-tensor,fp8-channel,fp8-block --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.md 2> $R/ab.err; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
cut -d'|' -f2,3,5,6- $R/ab.md | tail -36
