set -u
# The 4-bit wgmma kernel's 288-token-tile instance (kPairWide: kPairFull's m64n256k16 pairing, rows 256..287 on a third
# m64n32k16 sharing the decoded weights), taken at 225..288 expected rows per expert (w4_wgmma_pair_rule: Qwen3-30B-A3B
# at 4096 tokens). One binary: on = default, off = FUSEDMOE_W4_PAIR_WIDE=0 (the kPairFull instance there, as before).
# Tests (W4 suites, the wgmma kernel tests with the 225..288-row cases), memcheck, then an interleaved A/B.
# r1: `bash bench/results/2026-11-28-h100-w4-pair-wide/run.sh`
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/pw; O=$OUT/pw; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
timeout 200 $B/tests --gtest_filter='W4*:*W4*:Formats/LargeGpu.*' > $R/t.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 $B/tests --gtest_filter='*W4Wgmma*' > $R/t_mc.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
for f in t t_mc; do grep -E "^\[  FAILED|PASSED|FAILED  \]|ERROR SUMMARY|SKIPPED" $R/$f.log | tail -8 | sed "s/^/$f: /"; done | tee $O/tests_summary.txt
AB="python3 bench/ab.py run --bench $B/bench"
ab() {  # name presets m formats
  timeout ${ABT:-240} $AB --out $R/ab_$1 --variant off:FUSEDMOE_W4_PAIR_WIDE=0 --variant on: --order ${ORDER:-off,on,on,off,off,on,on,off,off,on} --base off -- \
    --preset $2 --m $3 --formats $4 --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.3 > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $O/ab_$1.md
  python3 bench/ab.py stages $(ls -d $R/ab_$1/*_*/) > $O/stages_$1.txt 2>&1
}
ab qwen3 qwen3-30b-a3b-tp1 4096 mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4
ABT=110 ab qwen3b qwen3-30b-a3b-tp1 3840,4608 mxfp4
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/pw.tgz -C $R . ; echo "done $(( $(date +%s)-t0 ))s"
