set -u
# v2 (rolled epilogue, per-CTA constants): targeted tests, then the interleaved same-binary A/B.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/r2; mkdir -p $R; B=$PWD/.devcarry/bin; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 120 $B/fusedmoe_gpu_tests --gtest_filter='*StreamGemm*:*SmallMActivation*:*Gemm1Act*' > $R/targeted.log 2>&1; echo "targeted rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/targeted.log | head -20; grep -E "PASSED|FAILED  \]" $R/targeted.log | tail -3
timeout 300 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/ab --variant base:FMOE_AB_NO_STREAM_ACT=1 --variant new: --order base,new,base,new,base,new --base base -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 8,64,256 --formats bf16,fp8-tensor --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.md 2> $R/ab.err; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
tail -16 $R/ab.md
gzip -9 $R/targeted.log
