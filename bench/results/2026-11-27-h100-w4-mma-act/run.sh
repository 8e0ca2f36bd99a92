set -u
# GEMM1 + activation in the 4-bit mma kernel (MXFP4 / NVFP4 at the mma path's batch sizes) against the
# separate activation kernel (FUSEDMOE_W4_MMA_ACT=0), same binary: the whole GPU suite, then the A/B at 2-64 tokens.
# `bash bench/results/2026-11-27-h100-w4-mma-act/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/wma; O=$OUT/wma; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
timeout 300 $B/fusedmoe_gpu_tests > $R/tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|PASSED  \]|FAILED  \]|SKIPPED \]" $R/tests.log | tail -6 | tee $O/tests_summary.txt
gzip -c $R/tests.log > $O/tests.log.gz
timeout 240 python3 bench/ab.py run --bench $B/fusedmoe-bench --out $R/ab --variant off:FUSEDMOE_W4_MMA_ACT=0 --variant on: \
  --order off,on,off,on,off,on --base off -- --preset qwen3-30b-a3b-tp1,gpt-oss-120b,deepseek-v3-tp1 \
  --m 2,8,16,32,64 --formats mxfp4,nvfp4 --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.3 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log | tee $O/ab.md
python3 bench/ab.py stages $R/ab/* > $O/ab_stages.txt 2>&1
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/wma.tgz -C $R ab ab.log; echo "done $(( $(date +%s)-t0 ))s"
