set -u
# The 4-bit mma kernel's tail instances (w4_gemm.cu kTail: the e2m1 8-token tile's last stage of one 128-k
# sub-chunk without the second sub-chunk's zeros; gpt-oss-120b's k = 2880). Binaries: T0 (the tail instances at
# their natural registers: mxfp4 96, nvfp4 119) and T6 (held to 6 blocks per SM, 80 registers); off = T6's binary
# with FUSEDMOE_W4_TAIL=0 (the old instances, SASS-identical to 02713d7's). Tests of T0 (the W4 suites, memcheck of
# W4Gpu), then an interleaved A/B at the mma kernel's sizes. r1: `bash bench/results/2026-11-28-h100-w4-tail/run.sh`.
# r2 (nvfp4's tail instance held to 5 blocks per SM, T5; the binary of off and T5):
# `BENCH=.devcarry/bin/bench_T5 V=T5 ORDER=off,T5,T0,T0,T5,off NAME=nv5 FORMATS=nvfp4,nvfp4-w4a4 bash bench/results/2026-11-28-h100-w4-tail/run.sh`
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/tl; O=$OUT/tl; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
[ -x $B/tests_A ] && timeout 150 $B/tests_A --gtest_filter='W4*:*W4*:Formats/LargeGpu.*' > $R/t.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
[ -x $B/tests_A ] && timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 $B/tests_A --gtest_filter='Formats/W4Gpu.Decode*:Formats/W4Gpu.Ragged*' > $R/t_mc.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
for f in t t_mc; do grep -E "^\[  FAILED|PASSED|FAILED  \]|ERROR SUMMARY|SKIPPED" $R/$f.log | tail -6 | sed "s/^/$f: /"; done | tee $O/tests_summary.txt
AB="python3 bench/ab.py run --bench ${BENCH:-$B/bench_T6} --variant-bench T0=$B/bench_T0"
ab() {  # name presets m formats
  timeout ${ABT:-240} $AB --out $R/ab_$1 --variant off:FUSEDMOE_W4_TAIL=0 --variant ${V:-T6}: --variant T0: --order ${ORDER:-off,T6,T0,T0,T6,off} --base off -- \
    --preset $2 --m $3 --formats $4 --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.3 > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $O/ab_$1.md
  python3 bench/ab.py stages $(ls -d $R/ab_$1/*_*/) > $O/stages_$1.txt 2>&1
}
ab ${NAME:-gptoss} gpt-oss-120b 8,16,64 ${FORMATS:-mxfp4,nvfp4,mxfp4-fp8,nvfp4-w4a4}
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/tl.tgz -C $R . ; echo "done $(( $(date +%s)-t0 ))s"
