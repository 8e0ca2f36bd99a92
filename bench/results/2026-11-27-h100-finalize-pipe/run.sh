set -u
# The pipelined finalize (resident grid, next token's slots loaded behind the current token's y loads,
# U column vectors per thread for top-k < 8) against the one-block-per-token vector kernel
# (FUSEDMOE_FINALIZE_V1=1), same binary, interleaved three times each, at the batches where the finalize is
# a visible part of the layer. Before it: the finalize's bit-equality tests and the layer tests.
# `bash bench/results/2026-11-27-h100-finalize-pipe/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/fpab; mkdir -p $R $OUT/ab
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/ab/device.txt; cat $B/sha >> $OUT/ab/device.txt; date -u >> $OUT/ab/device.txt
timeout 240 $B/fusedmoe_gpu_tests --gtest_filter='*Finalize*:*Layer*:*Edge*' > $R/tests.log 2>&1
echo "tests rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|FAILED" $R/tests.log | tail -15 | tee $OUT/ab/tests_summary.txt
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
ab() {  # name presets m formats
  timeout ${ABT:-200} $AB --out $R/ab_$1 --variant v1:FUSEDMOE_FINALIZE_V1=1 --variant pipe: --order v1,pipe,v1,pipe,v1,pipe --base v1 -- \
    --preset $2 --m $3 --formats $4 --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes ${ABM:-0.5} > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $OUT/ab/ab_$1.md
}
ab main qwen3-30b-a3b-tp1,mixtral-8x7b,deepseek-v3-tp8 256,1024,4096 bf16,fp8-tensor
ABT=120 ab w4 gpt-oss-120b,qwen3-30b-a3b-tp1 1024,4096 mxfp4
python3 bench/ab.py stages $R/ab_main/* $R/ab_w4/* > $OUT/ab/ab_stages.txt 2>&1
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
gzip -c $R/tests.log > $OUT/ab/tests.log.gz
tar czf $OUT/ab/runs.tgz -C $R ab_main ab_w4 ; echo "done $(( $(date +%s)-t0 ))s"
