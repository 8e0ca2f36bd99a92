set -u
# The 4-bit mma kernel's NVFP4 8-token instance with a stage's raw block scales in one 32-bit word per row (R: 82
# registers, 5 blocks per SM as before; R6: held to 6 blocks per SM, 80 registers) against old (a39feaa's binary:
# 64-bit words, 96 registers). Tests of both builds (W4 suites), memcheck of R6's decode tests, interleaved A/B.
# `bash bench/results/2026-11-28-h100-nvfp4-scale-word/run.sh` on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/sw; O=$OUT/sw; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
for v in R R6; do timeout 120 $B/tests_$v --gtest_filter='W4*:*W4*:Formats/LargeGpu.*' > $R/t_$v.log 2>&1; echo "tests $v rc=$? $(( $(date +%s)-t0 ))s"; done
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 $B/tests_R6 --gtest_filter='Formats/W4Gpu.Decode*:Formats/W4Gpu.Ragged*' > $R/t_mc.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
for f in t_R t_R6 t_mc; do grep -E "^\[  FAILED|PASSED|FAILED  \]|ERROR SUMMARY|SKIPPED" $R/$f.log | tail -6 | sed "s/^/$f: /"; done | tee $O/tests_summary.txt
timeout 300 python3 bench/ab.py run --bench $B/bench_old --variant-bench R=$B/bench_R --variant-bench R6=$B/bench_R6 --out $R/ab \
  --variant old: --variant R: --variant R6: --order old,R,R6,R6,R,old --base old -- \
  --preset gpt-oss-120b,deepseek-v3-tp1,qwen3-30b-a3b-tp1 --m 8,64 --formats nvfp4,nvfp4-w4a4 --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.3 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log | tee $O/ab.md
python3 bench/ab.py stages $(ls -d $R/ab/*_*/) > $O/stages.txt 2>&1
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/sw.tgz -C $R . ; echo "done $(( $(date +%s)-t0 ))s"
