set -u
# The 4-bit wgmma kernel's kPairFine instance (kPairAll's pairing with second halves of 8 .. 32 rows in steps of 8:
# m64n136 / n144 / n152 / n160), taken at 113..160 expected rows per expert (DeepSeek-V3 TP1 / gpt-oss-120b at 4096
# tokens, Qwen3-30B-A3B at 2048). One binary: on = default, off = FUSEDMOE_W4_PAIR_FINE=0 (kPairAll there, as before).
# Tests (W4 suites, wgmma kernel tests), memcheck, then an interleaved A/B.
# r1: `bash bench/results/2026-11-28-h100-w4-pair-fine/run.sh`
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/pf; O=$OUT/pf; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
timeout 200 $B/tests --gtest_filter='W4*:*W4*:Formats/LargeGpu.*' > $R/t.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 $B/tests --gtest_filter='*W4Wgmma*' > $R/t_mc.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
for f in t t_mc; do grep -E "^\[  FAILED|PASSED|FAILED  \]|ERROR SUMMARY|SKIPPED" $R/$f.log | tail -8 | sed "s/^/$f: /"; done | tee $O/tests_summary.txt
AB="python3 bench/ab.py run --bench $B/bench"
ab() {  # name presets m formats
  timeout ${ABT:-240} $AB --out $R/ab_$1 --variant off:FUSEDMOE_W4_PAIR_FINE=0 --variant on: --order ${ORDER:-off,on,on,off,off,on,on,off,off,on} --base off -- \
    --preset $2 --m $3 --formats $4 --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.3 > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $O/ab_$1.md
  python3 bench/ab.py stages $(ls -d $R/ab_$1/*_*/) > $O/stages_$1.txt 2>&1
}
ab ds deepseek-v3-tp1 4096 mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4
ab gptoss gpt-oss-120b 4096 mxfp4,mxfp4-fp8,nvfp4
ab qwen3 qwen3-30b-a3b-tp1 2048 mxfp4,nvfp4,mxfp4-fp8
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/pf.tgz -C $R . ; echo "done $(( $(date +%s)-t0 ))s"
