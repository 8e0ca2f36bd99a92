set -u
# The one-token layers (decode_layer.cu, decode_layer_w4.cu) handing GEMM1's partial sums to the epilogue warps
# through mbarriers (4 buffers per half; FUSEDMOE_DL_ASYNC_EPI default on) against the half barrier per task (=0),
# same binary: the decode / layer tests both ways and memcheck of the decode tests, then the layer A/B interleaved.
# `bash bench/results/2026-11-27-h100-decode-async-epilogue/run.sh` from the repository root on the device; $OUT/ae.tgz.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/aeab; O=/tmp/ae; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
for m in 1 0; do FUSEDMOE_DL_ASYNC_EPI=$m timeout 90 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*:*Layer*:*Edge*:*EpGpu*' > $R/tests_$m.log 2>&1; echo "tests async=$m rc=$? $(grep -E "PASSED|FAILED  \]" $R/tests_$m.log | tail -2 | tr '\n' ' ')"; done | tee $O/tests_summary.txt
grep -E "^\[  FAILED" $R/tests_1.log | head -5
timeout 90 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='Shapes/DecodeLayerGpu.*:Shapes/DecodeLayerW4Gpu.*:DecodeLayerGpuEdge.*' > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(grep -E "ERROR SUMMARY|PASSED" $R/memcheck.log | tail -2 | tr '\n' ' ')" | tee -a $O/tests_summary.txt
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
timeout 150 $AB --out $R/ab_ae --variant off:FUSEDMOE_DL_ASYNC_EPI=0 --variant on: --order off,on,off,on,off,on --base off -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,gpt-oss-120b --m 1 --formats fp8-tensor,fp8-channel,fp8-block,mxfp4,nvfp4,mxfp4-fp8,w4a8-int4,nvfp4-w4a4 \
  --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 0.15 > $R/ab_ae.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_ae.log | tee $O/ab_ae.md
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
gzip -c $R/tests_1.log > $O/tests_1.log.gz; gzip -c $R/memcheck.log > $O/memcheck.log.gz
tar czf $O/runs.tgz -C $R ab_ae
tar czf $OUT/ae.tgz -C /tmp ae; echo "done $(( $(date +%s)-t0 ))s"
