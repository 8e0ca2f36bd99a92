set -u
# The 4-bit GEMM2 + finalize in one kernel (w4_gemm.cu kFin: the last block of each 64-column group sums the
# top-k; the plan zeroes the counters). One binary: on = default, off = FUSEDMOE_W4_FIN=0 (GEMM2, then the
# finalize kernel; the mma instances SASS-identical to fdc7f64's). Tests (W4 suites incl. W4Fin, plans, decode
# layers, layer tests at decode sizes), memcheck of W4Fin and the W4 decode tests, then an interleaved A/B at the
# mma kernel's sizes on gpt-oss-120b, Qwen3-30B-A3B and DeepSeek-V3 TP1.
# r1: `bash bench/results/2026-11-28-h100-w4-fin/run.sh`
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/wf; O=$OUT/wf; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
if [ "${TESTS:-1}" = 1 ]; then
timeout 200 $B/tests_F --gtest_filter='W4*:*W4*:*Plan*:*Decode*:*Masked*:*Ep*' > $R/t.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 $B/tests_F --gtest_filter='*W4Fin*:Formats/W4Gpu.Decode*:W4GpuEdge.ExpertMap*' > $R/t_mc.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 3 $B/tests_F --gtest_filter='Cases/W4Fin.*M8*' > $R/t_rc.log 2>&1; echo "racecheck rc=$? $(( $(date +%s)-t0 ))s"
for f in t t_mc t_rc; do grep -E "^\[  FAILED|PASSED|FAILED  \]|ERROR SUMMARY|SKIPPED|RACECHECK SUMMARY" $R/$f.log | tail -8 | sed "s/^/$f: /"; done | tee $O/tests_summary.txt
fi
AB="python3 bench/ab.py run --bench $B/bench_F"
ab() {  # name presets m formats
  timeout ${ABT:-200} $AB --out $R/ab_$1 --variant off:FUSEDMOE_W4_FIN=0 --variant on: --order ${ORDER:-off,on,on,off,off,on} --base off -- \
    --preset $2 --m $3 --formats $4 --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.3 > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $O/ab_$1.md
  python3 bench/ab.py stages $(ls -d $R/ab_$1/*_*/) > $O/stages_$1.txt 2>&1
}
ab qwen3 qwen3-30b-a3b-tp1 2,8,16,64 mxfp4,nvfp4,mxfp4-fp8,w4a8-int4,nvfp4-w4a4
ab gptoss gpt-oss-120b 2,8,64 mxfp4,nvfp4,mxfp4-fp8
ab ds deepseek-v3-tp1 8,64 mxfp4,w4a8-int4
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/wf.tgz -C $R . ; echo "done $(( $(date +%s)-t0 ))s"
