set -u
# The one-token 4-bit layer (decode_layer_w4.cu) asking its CTA's GEMM1 rows into L2 at the start (bulk prefetches;
# FUSEDMOE_DL_W4_PREFETCH=1), also its W2 slices (=2), or nothing (=0, the kernel before), same binary: the decode /
# 4-bit / layer tests first, then the layer A/B interleaved. `bash bench/results/2026-11-27-h100-decode-w4-prefetch/run.sh`
# from the repository root on the device; everything lands in $OUT/pf.tgz.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/pfab; O=/tmp/pf; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='*Decode*:*W4*:*Layer*:*Edge*' > $R/tests.log 2>&1
echo "tests rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\[  FAILED" $R/tests.log | head
grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4 | tee $O/tests_summary.txt
for m in 0 1 2; do FUSEDMOE_DL_W4_PREFETCH=$m timeout 60 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayerW4*' > $R/tests_m$m.log 2>&1; echo "decode tests mode $m rc=$? $(grep -E "PASSED|FAILED  \]" $R/tests_m$m.log | tail -2 | tr '\n' ' ')"; done | tee -a $O/tests_summary.txt
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
timeout 240 $AB --out $R/ab_pf --variant p0:FUSEDMOE_DL_W4_PREFETCH=0 --variant p1:FUSEDMOE_DL_W4_PREFETCH=1 \
  --variant p2:FUSEDMOE_DL_W4_PREFETCH=2 --order p0,p1,p2,p0,p1,p2,p0,p1,p2,p0,p1,p2 --base p0 -- \
  --preset qwen3-30b-a3b-tp1,gpt-oss-120b,gpt-oss-120b-interleaved --m 1 --formats mxfp4,nvfp4,mxfp4-fp8,w4a8-int4,nvfp4-w4a4 \
  --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 0.25 > $R/ab_pf.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_pf.log | tee $O/ab_pf.md
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
gzip -c $R/tests.log > $O/tests.log.gz
tar czf $O/runs.tgz -C $R ab_pf
tar czf $OUT/pf.tgz -C /tmp pf; echo "done $(( $(date +%s)-t0 ))s"
