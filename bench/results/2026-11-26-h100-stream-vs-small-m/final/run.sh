set -u
# small_m_ok: the small-M kernels only in front of the decode fusions. GPU suite, then an
# interleaved A/B of the previous binary (a2072e3) against this one at decode sizes.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/f; mkdir -p $R; B=$PWD/.devcarry/bin; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 200 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
timeout 200 python3 bench/ab.py run --variant-bench prev=$B/fusedmoe-bench-prev --variant-bench new=$B/fusedmoe-bench --out /tmp/ab --variant prev: --variant new: --order prev,new,prev,new --base prev -- --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 --m 1,2,3,4 --formats bf16,fp8-tensor,fp8-channel,fp8-block --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.md 2> $R/ab.err; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
tail -3 $R/ab.md
gzip -9 $R/gpu_tests.log
cd $OUT && tar czf f.tgz f && rm -rf f
