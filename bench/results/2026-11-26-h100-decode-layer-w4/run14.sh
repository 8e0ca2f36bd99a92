set -u
# v13: GEMM1 tasks on 4 groups of 4 warps (4 tasks in flight per CTA, no pipelining) instead of 2 groups of 8 with two
# pipelined tasks, for 1024 < K <= 2048 (Qwen3-30B-A3B), switched by FMOE_W4_GROUPS4 in one binary (AB-TEMP):
# decode-layer tests in both settings, A/B at M = 1.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/r14; mkdir -p $R; t0=$(date +%s); B=$PWD/.devcarry/bin
FMOE_W4_GROUPS4=1 timeout 100 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*' > $R/tests_groups4.log 2>&1; echo "tests (groups4) rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/tests_groups4.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests_groups4.log | tail -4
timeout 300 python3 bench/ab.py run --out $R/ab --bench $B/fusedmoe-bench --variant g8: --variant g4:FMOE_W4_GROUPS4=1 \
  --order g8,g4,g8,g4,g8,g4 --base g8 -- --preset qwen3-30b-a3b-tp1 --m 1 --formats mxfp4,nvfp4,mxfp4-fp8,w4a8-int4,nvfp4-w4a4 \
  --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.log 2>&1; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
grep "^|" $R/ab.log | tail -6; tail -3 $R/ab.log
gzip -9 $R/tests_groups4.log
