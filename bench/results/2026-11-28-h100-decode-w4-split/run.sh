set -u
# The one-token 4-bit layer's shared leftover tasks: head = ff9d3cd's binary, new = the change. Decode-layer tests
# (memcheck on the W4 ones), then an interleaved A/B at one token. `bash bench/results/2026-11-28-h100-decode-w4-split/run.sh`.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/dsp; O=$OUT/split; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
timeout 200 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*:W4*:*W4*' > $R/t.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 $B/fusedmoe_gpu_tests --gtest_filter='Shapes/DecodeLayerW4Gpu.*' > $R/t_mc.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
for f in t t_mc; do grep -E "^\[  FAILED|PASSED|FAILED  \]|ERROR SUMMARY|SKIPPED" $R/$f.log | tail -6 | sed "s/^/$f: /"; done | tee $O/tests_summary.txt
timeout 300 python3 bench/ab.py run --bench $B/fusedmoe-bench --variant-bench head=$B/bench_head --out $R/ab --variant head: --variant new: \
  --order head,new,new,head,head,new --base head -- --preset gpt-oss-120b,qwen3-30b-a3b-tp1 --m 1 \
  --formats mxfp4,nvfp4,mxfp4-fp8,nvfp4-w4a4,w4a8-int4 --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 0.2 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log | tee $O/ab.md
