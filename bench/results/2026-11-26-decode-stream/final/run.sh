set -u
# The kept rule (stream_gemm1_decode_pays) + deep ring, against b9e64e5's behaviour (prev binary
# with FMOE_AB_NO_STREAM_ACT=1: no stream GEMM1 + activation, no decode-size stream GEMM1, no deep
# ring) and 9abd19c's (prev binary, no switch). GPU suite, memcheck of the stream tests, A/B.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/f; mkdir -p $R; B=$PWD/.devcarry/bin; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 230 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
GTEST_FILTER='Shapes/StreamGemm*:Cases/StreamGemmAct.*:EdgeGpu.OneToken:AllFormatsActivations/LayerGpu.MatchesOracle/*_silu_vllm' timeout 150 bash scripts/gpu_sanitize.sh $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ERROR SUMMARY|PASSED|FAILED" $R/memcheck.log | sort | uniq -c | head -5 | tee $R/memcheck_summary.txt
timeout 300 python3 bench/ab.py run --variant-bench old=$B/fusedmoe-bench-prev --variant-bench mid=$B/fusedmoe-bench-prev --variant-bench new=$B/fusedmoe-bench --out /tmp/abf --variant old:FMOE_AB_NO_STREAM_ACT=1 --variant mid: --variant new: --order old,mid,new,old,new --base old -- --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 --m 1,2,8,64,256 --formats bf16,fp8-tensor,fp8-channel,fp8-block --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.md 2> $R/ab.err; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
tail -4 $R/ab.md
gzip -9 $R/gpu_tests.log $R/memcheck.log
