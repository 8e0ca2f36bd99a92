set -u
# The 4-bit mma GEMM with several 16-row groups per warp (FUSEDMOE_W4_ROW_GROUPS=G: the kMulti instances, one
# cp.async ring across the groups) against one group (G=1, the kernel before), same binary: the 4-bit GPU tests
# first, then the layer A/B interleaved. `bash bench/results/2026-11-27-h100-w4-row-groups/run.sh` from the
# repository root on the device; everything lands in $OUT/rg.tgz.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/rgab; O=/tmp/rg; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='*W4*:*Plan*:*Decode*:*Edge*' > $R/tests.log 2>&1
echo "tests rc=$? $(( $(date +%s)-t0 ))s"; grep -E "^\[  FAILED" $R/tests.log | head
grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4 | tee $O/tests_summary.txt
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
ab() {  # name presets m formats
  timeout ${ABT:-200} $AB --out $R/ab_$1 --variant g1:FUSEDMOE_W4_ROW_GROUPS=1 --variant g2:FUSEDMOE_W4_ROW_GROUPS=2 \
    --variant g4:FUSEDMOE_W4_ROW_GROUPS=4 --order g1,g2,g4,g1,g2,g4,g1,g2,g4 --base g1 -- \
    --preset $2 --m $3 --formats $4 --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes ${ABM:-0.3} > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $O/ab_$1.md
}
ABT=280 ab w4 qwen3-30b-a3b-tp1,gpt-oss-120b 8,16,64 mxfp4,nvfp4,w4a8-int4
ABT=150 ab ds deepseek-v3-tp1 8,64 mxfp4,w4a8-int4
python3 bench/ab.py stages $R/ab_*/* > $O/ab_stages.txt 2>&1
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
gzip -c $R/tests.log > $O/tests.log.gz
tar czf $O/runs.tgz -C $R $(cd $R && ls -d ab_* | grep -v '\.log$')
tar czf $OUT/rg.tgz -C /tmp rg; echo "done $(( $(date +%s)-t0 ))s"
