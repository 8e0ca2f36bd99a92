set -u
# The 4-bit wgmma kernel with each width pair's tile in its own __noinline__ function (w4_wgmma_tile<F, O, N0, N1>:
# one register allocation and schedule per mainloop instance). Binaries: base = fdc7f64's w4_wgmma.cu (bench_0 of
# ../2026-11-28-h100-w4-wgmma-pair), I = the tile functions, IQ = I + one m64n256k16 for full tiles
# (pair256_on_tiles.diff). Tests of IQ, memcheck of the wgmma tests, then an interleaved A/B at the wgmma way's sizes.
# r1: `bash bench/results/2026-11-28-h100-w4-wgmma-tiles/run.sh`
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/wt; O=$OUT/wt; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
if [ "${TESTS:-1}" = 1 ]; then
timeout 200 $B/tests_IQ --gtest_filter='W4*:*W4*:Formats/LargeGpu.*' > $R/t.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 $B/tests_IQ --gtest_filter='*W4Wgmma*:Formats/W4Gpu.LargeBatch*' > $R/t_mc.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
for f in t t_mc; do grep -E "^\[  FAILED|PASSED|FAILED  \]|ERROR SUMMARY|SKIPPED" $R/$f.log | tail -8 | sed "s/^/$f: /"; done | tee $O/tests_summary.txt
fi
AB="python3 bench/ab.py run --bench $B/bench_0 --variant-bench I=$B/bench_I --variant-bench IQ=$B/bench_IQ"
ab() {  # name presets m formats
  timeout ${ABT:-240} $AB --out $R/ab_$1 --variant base: --variant I: --variant IQ: --order ${ORDER:-base,I,IQ,IQ,I,base,base,I,IQ} --base base -- \
    --preset $2 --m $3 --formats $4 --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.3 > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $O/ab_$1.md
  python3 bench/ab.py stages $(ls -d $R/ab_$1/*_*/) > $O/stages_$1.txt 2>&1
}
ab qwen3 qwen3-30b-a3b-tp1 256,1024,4096 mxfp4,nvfp4,nvfp4-w4a4
ab gptoss gpt-oss-120b 256,1024,4096 mxfp4,mxfp4-fp8
ab ds deepseek-v3-tp1 1024,4096 mxfp4,mxfp4-fp8,nvfp4
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/wt.tgz -C $R . ; echo "done $(( $(date +%s)-t0 ))s"
