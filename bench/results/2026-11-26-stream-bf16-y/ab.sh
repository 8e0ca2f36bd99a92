set -u
# GEMM2's y in bf16 on the stream GEMM (layers with a bf16 output, as the large CUTLASS configs
# already do) against fp32 y (FMOE_AB_NO_STREAM_D16=1, AB-TEMP), same binary; targeted tests first.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/y; mkdir -p $R; B=$PWD/.devcarry/bin; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='*StreamGemm*:*Layer*:*Edge*:*Fp8Block*:*LongN*:*LongK*:*Large*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/tests.log | head; grep -E "PASSED|FAILED  \]" $R/tests.log | tail -3 | tee $R/tests_summary.txt
GTEST_FILTER='Shapes/StreamGemm*' timeout 60 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[==========\].*ran|ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3 | tee $R/memcheck_summary.txt
gzip -9 $R/tests.log $R/memcheck.log
A="--variant old:FMOE_AB_NO_STREAM_D16=1 --variant new: --order old,new,old,new --base old"
O="--formats bf16,fp8-tensor,fp8-block --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 1"
timeout 150 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/ab1 $A -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 64,256,512,1024 $O > $R/ab_a.md 2> $R/ab_a.err; echo "ab a rc=$? $(( $(date +%s)-t0 ))s"
cut -d'|' -f2,3,5,10- $R/ab_a.md | tail -28
timeout 170 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/ab2 $A -- --preset deepseek-v3-tp1,mixtral-8x7b --m 8,64,256,1024 $O > $R/ab_b.md 2> $R/ab_b.err; echo "ab b rc=$? $(( $(date +%s)-t0 ))s"
cut -d'|' -f2,3,5,10- $R/ab_b.md | tail -28
