set -u
# Small grids on the stream GEMM: one weight block per CTA over up to one CTA per SM with an
# 8-stage ring (deep; FMOE_AB_NO_DEEP=1 = before), and GEMM1 (+ activation) of the fused decode
# sizes on the stream GEMM instead of the small-M kernel (FMOE_AB_DECODE_STREAM=1).
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/d; mkdir -p $R; B=$PWD/.devcarry/bin; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 120 $B/fusedmoe_gpu_tests --gtest_filter='*StreamGemm*' > $R/targeted.log 2>&1; echo "targeted rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/targeted.log | head -20; grep -E "PASSED|FAILED  \]" $R/targeted.log | tail -3
timeout 420 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/abd --variant base:FMOE_AB_NO_DEEP=1 --variant deep: --variant ds:FMOE_AB_DECODE_STREAM=1 --variant dsnodeep:FMOE_AB_DECODE_STREAM=1,FMOE_AB_NO_DEEP=1 --order base,deep,ds,dsnodeep,base,deep,ds,dsnodeep --base base -- --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 --m 1,2,8 --formats bf16,fp8-tensor,fp8-block --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.md 2> $R/ab.err; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
tail -42 $R/ab.md | cut -d'|' -f2,3,5,14-
gzip -9 $R/targeted.log
