set -u
# The 4-bit wgmma GEMM1 + activation gathering its rows by token (2250599) against the slot-row operand:
# GPU tests of the touched paths + memcheck, then interleaved A/B: old = 5a11fec's binary, off = the new binary
# with FUSEDMOE_W4_GATHER=0, new = the new binary. `bash bench/results/2026-11-28-h100-w4-gather/run.sh` on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/w4g; O=$OUT/w4g; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
F='W4*:*W4*:Gemm1GatherGpu.*:Cases/GatherTokenPaths.*:Cases/GatherRowPaths.*:Formats/LargeGpu.*'
timeout 200 $B/fusedmoe_gpu_tests --gtest_filter="$F" > $R/t_subset.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 $B/fusedmoe_gpu_tests --gtest_filter='W4TokenOperand.*:W4WgmmaActGpu.PerTokenFp8RowsBitwiseEqualToUnfused:W4WgmmaActGpu.BitwiseEqualToUnfusedStages' > $R/t_memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
for f in t_subset t_memcheck; do grep -E "^\[  FAILED|PASSED|FAILED  \]|ERROR SUMMARY|SKIPPED" $R/$f.log | tail -8 | sed "s/^/$f: /"; done | tee $O/tests_summary.txt
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench --variant-bench old=$B/fusedmoe-bench-5a11fec"
ab() {  # name presets m formats order
  timeout ${ABT:-300} $AB --out $R/ab_$1 --variant old: --variant off:FUSEDMOE_W4_GATHER=0 --variant new: --order $4 --base old -- \
    --preset $2 --m $3 --formats mxfp4,nvfp4,mxfp4-fp8 --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.4 > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $O/ab_$1.md
  python3 bench/ab.py stages $(ls -d $R/ab_$1/*_*/) > $O/stages_$1.txt 2>&1
}
ab small qwen3-30b-a3b-tp1,gpt-oss-120b 1024,4096 old,off,new,old,off,new
ABT=360 ab ds deepseek-v3-tp1 1024,4096 old,off,new,new,off,old
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/w4g.tgz -C $R . ; echo "done $(( $(date +%s)-t0 ))s"
