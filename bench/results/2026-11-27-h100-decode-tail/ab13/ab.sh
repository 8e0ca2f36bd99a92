set -u
# The one-token layers' change of the last call (ab10: the top-k sum by a warp per slot) against 1f2eb1d's binary, same call:
# decode-layer GPU tests, memcheck of them, then interleaved A/B at one token.
# `bash bench/results/2026-11-27-h100-decode-tail/ab.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/dtab; O=$OUT/ab; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
F='*DecodeLayer*'
timeout 120 $B/fusedmoe_gpu_tests --gtest_filter="$F" > $R/t_wgmma.log 2>&1; echo "tests wgmma rc=$? $(( $(date +%s)-t0 ))s"
timeout 240 compute-sanitizer --tool memcheck --error-exitcode 3 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayerGpu*:*DecodeLayerDynamic*:*DecodeLayerW4Gpu.MatchesOracle/0' > $R/t_memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
for f in t_wgmma t_memcheck; do grep -E "^\[  FAILED|PASSED|FAILED  \]|ERROR SUMMARY" $R/$f.log | tail -5 | sed "s/^/$f: /"; done | tee $O/tests_summary.txt
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench --variant-bench old=$B/fusedmoe-bench-33e3cfd"
ab() {  # name presets formats variants order
  timeout ${ABT:-240} $AB --out $R/ab_$1 $4 --order $5 --base old -- \
    --preset $2 --m 1 --formats $3 --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 0.25 > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $O/ab_$1.md
}
ABT=300 ab w4 qwen3-30b-a3b-tp1,gpt-oss-120b mxfp4,nvfp4,mxfp4-fp8,w4a8-int4,nvfp4-w4a4 "--variant old: --variant new:" old,new,old,new,old,new,old,new

find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/ab.tgz -C $R . ; echo "done $(( $(date +%s)-t0 ))s"
