set -u
# The 4-bit wgmma kernel's 288-token-tile instance (kPairWide) at 8192 tokens: gpt-oss-120b and DeepSeek-V3 TP1 have 256
# rows per expert there (WIDE since run.sh), Qwen3-30B-A3B 512 (WIDE with the rule's 505..576 range). One binary: on =
# default, off = FUSEDMOE_W4_PAIR_WIDE=0 (kPairFull). Tests (W4 suites, wgmma kernel tests), memcheck, then the A/B.
# r2: `bash bench/results/2026-11-28-h100-w4-pair-wide/run8k.sh` (8192 tokens: 256 rows per expert on gpt-oss-120b / DeepSeek-V3 TP1, 512 on Qwen3-30B-A3B)
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/pw8; O=$OUT/pw8; mkdir -p $R $O
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
ORDER=off,on,on,off,off,on,on,off ab qwen3 qwen3-30b-a3b-tp1 8192 mxfp4,nvfp4
ORDER=off,on,on,off,off,on ab gptoss gpt-oss-120b 8192 mxfp4,nvfp4
ORDER=off,on,on,off ABT=200 ab ds deepseek-v3-tp1 8192 mxfp4
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/pw8.tgz -C $R . ; echo "done $(( $(date +%s)-t0 ))s"
