set -u
# The one-token fp8 layer kernel with its last warp prefetching the CTA's first GEMM1 load round into L2 while
# the other warps quantise x (on) against every warp quantising x (FUSEDMOE_DL_PREFETCH=0), same binary,
# interleaved five times each at one token. Tests and memcheck of the decode-layer tests first.
# `bash bench/results/2026-11-27-h100-decode-prefetch/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/dlp; mkdir -p $R $OUT/dlp
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/dlp/device.txt; cat $B/sha >> $OUT/dlp/device.txt; date -u >> $OUT/dlp/device.txt
F='Shapes/DecodeLayerGpu.*:DecodeLayerGpuEdge.*:*Edge*:AllFormatsActivations/LayerGpu.*'
timeout 150 $B/fusedmoe_gpu_tests --gtest_filter="$F" > $R/tests.log 2>&1
echo "tests rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED" $R/tests.log | tail -6 | tee $OUT/dlp/tests_summary.txt
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 86 $B/fusedmoe_gpu_tests --gtest_filter='Shapes/DecodeLayerGpu.*:DecodeLayerGpuEdge.*' > $R/memcheck.log 2>&1
echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"; grep -E "ERROR SUMMARY|PASSED" $R/memcheck.log | tail -2 | tee $OUT/dlp/memcheck_summary.txt
timeout 300 python3 bench/ab.py run --bench $B/fusedmoe-bench --out $R/ab --variant off:FUSEDMOE_DL_PREFETCH=0 --variant on: \
  --order off,on,off,on,off,on,off,on,off,on --base off -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,deepseek-v3-tp1,mixtral-8x7b --m 1 --formats fp8-tensor,fp8-channel,fp8-block --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 0.4 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log | tee $OUT/dlp/ab.md
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
gzip -c $R/tests.log > $OUT/dlp/tests.log.gz
tar czf $OUT/dlp/runs.tgz -C $R ab ; echo "done $(( $(date +%s)-t0 ))s"
