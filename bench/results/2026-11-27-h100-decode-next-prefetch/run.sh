set -u
# The one-token fp8 layer (decode_layer.cu): each CTA half asks its next task's first load round into L2 behind the
# current round's loads (FUSEDMOE_DL_NEXT_PREFETCH, default on) against none (=0), same binary: the decode / layer
# tests both ways first, then the layer A/B interleaved. `bash bench/results/2026-11-27-h100-decode-next-prefetch/run.sh`
# from the repository root on the device; everything lands in $OUT/nx.tgz.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/nxab; O=/tmp/nx; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
for m in 1 0; do FUSEDMOE_DL_NEXT_PREFETCH=$m timeout 100 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*:*Layer*:*Edge*' > $R/tests_$m.log 2>&1; echo "tests prefetch=$m rc=$? $(grep -E "PASSED|FAILED  \]" $R/tests_$m.log | tail -2 | tr '\n' ' ')"; done | tee $O/tests_summary.txt
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
timeout 200 $AB --out $R/ab_nx --variant off:FUSEDMOE_DL_NEXT_PREFETCH=0 --variant on: --order off,on,off,on,off,on,off,on --base off -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1 --formats fp8-tensor,fp8-channel,fp8-block \
  --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 0.2 > $R/ab_nx.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_nx.log | tee $O/ab_nx.md
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
gzip -c $R/tests_1.log > $O/tests_1.log.gz
tar czf $O/runs.tgz -C $R ab_nx
tar czf $OUT/nx.tgz -C /tmp nx; echo "done $(( $(date +%s)-t0 ))s"
