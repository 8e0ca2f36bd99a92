set -u
# GEMM2's bf16-D CUTLASS instances with 128 x 64 epilogue subtiles (new) against the automatic 128 x 32 (base:
# 944d2a3's bench binary). The GPU suite of the new binaries first, then the layer A/B interleaved three times each.
# `bash bench/results/2026-11-27-h100-d16-epilogue-tile/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/d16e; mkdir -p $R $OUT/d16e
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/d16e/device.txt; cat $B/sha >> $OUT/d16e/device.txt; date -u >> $OUT/d16e/device.txt
timeout 240 $B/fusedmoe_gpu_tests > $R/tests.log 2>&1
echo "suite rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\[  FAILED" $R/tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4 | tee $OUT/d16e/tests_summary.txt
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench --variant-bench base=$B/bench_base"
timeout 300 $AB --out $R/ab --variant base: --variant new: --order base,new,base,new,base,new --base base -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,mixtral-8x7b --m 1024,2048,4096 --formats bf16,fp8-tensor --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.5 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log | tee $OUT/d16e/ab.md
timeout 150 python3 bench/ab.py run --bench $B/fusedmoe-bench --variant-bench base=$B/bench_base --out $R/ab_ds1 --variant base: --variant new: \
  --order base,new,base,new,base,new --base base -- --preset deepseek-v3-tp1 --m 4096 --formats bf16,fp8-tensor --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.5 > $R/ab_ds1.log 2>&1
echo "ab ds1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_ds1.log | tee $OUT/d16e/ab_ds1.md
python3 bench/ab.py stages $R/ab/* $R/ab_ds1/* > $OUT/d16e/ab_stages.txt 2>&1
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
gzip -c $R/tests.log > $OUT/d16e/tests.log.gz
tar czf $OUT/d16e/runs.tgz -C $R ab ab_ds1 ; echo "done $(( $(date +%s)-t0 ))s"
