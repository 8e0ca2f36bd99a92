set -u
# The 4-bit wgmma kernel's staged epilogue stores (w4_wgmma.cu store_rows): old = 384ac4d's binary (one cp.async.bulk
# per token row, issued lane by lane), A = the fp32 D tile by 16-byte warp row stores (GEMM1's fused activation
# keeps its bulk copies), B = both tiles by row stores (variantB_vs_A.diff). Tests of A (B's only if it is kept: the carry limit), then an interleaved
# A/B. Run 1: old, A and A's tests (VARS='old A' ORDER=old,A,A,old); the carry limit leaves B for a later call.
# `bash bench/results/2026-11-28-h100-w4-store/run.sh` on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/st; O=$OUT/st; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
F='W4*:*W4*:Formats/LargeGpu.*'
[ -x $B/tests_A ] && timeout 200 $B/tests_A --gtest_filter="$F" > $R/t_A.log 2>&1; echo "tests A rc=$? $(( $(date +%s)-t0 ))s"
[ -x $B/tests_A ] && timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 $B/tests_A --gtest_filter='W4WgmmaGpu.*:W4WgmmaActGpu.*' > $R/t_mcA.log 2>&1; echo "memcheck A rc=$? $(( $(date +%s)-t0 ))s"
for f in t_A t_mcA; do grep -E "^\[  FAILED|PASSED|FAILED  \]|ERROR SUMMARY|SKIPPED" $R/$f.log | tail -6 | sed "s/^/$f: /"; done | tee $O/tests_summary.txt
VB=""; for v in old B; do [ -x $B/bench_$v ] && VB="$VB --variant-bench $v=$B/bench_$v"; done
AB="python3 bench/ab.py run --bench $B/bench_A $VB"
ab() {  # name presets m order
  timeout ${ABT:-300} $AB --out $R/ab_$1 $(for v in ${VARS:-old A B}; do echo --variant $v:; done) --order $4 --base ${BASE:-old} -- \
    --preset $2 --m $3 --formats mxfp4,nvfp4,mxfp4-fp8 --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.3 > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $O/ab_$1.md
  python3 bench/ab.py stages $(ls -d $R/ab_$1/*_*/) > $O/stages_$1.txt 2>&1
}
ab small qwen3-30b-a3b-tp1,gpt-oss-120b 256,1024,4096 ${ORDER:-old,A,B,B,A,old}
ABT=360 ab ds deepseek-v3-tp1 1024,4096 ${ORDER:-old,A,B,B,A,old}
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/st.tgz -C $R . ; echo "done $(( $(date +%s)-t0 ))s"
